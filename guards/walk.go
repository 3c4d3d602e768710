package guards

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// walker finds the string leaves of a JSON document without building a tree: keys are only
// remembered (as slices of the document) so that a finding's JSON pointer can be spelled out
// when there is one, and a leaf's text is a slice of the document unless it holds escapes.
// A walker is reused through the run pool, so walking allocates nothing in the steady state.
type walker struct {
	doc       string
	leaves    []leaf
	segs      []seg
	textBytes int // total length of the leaves, to decide whether parallel guards pay off
}

// leaf is one non-empty string value.
type leaf struct {
	text       string // decoded
	start, end int    // the string literal in doc, quotes included; for CheckTexts, start is the text's index
	seg        int32  // its path; -1 for the root
	named      string // the caller's path, for CheckTexts; "" elsewhere
}

// seg is one step of a path: an array index, or an object key as written between its quotes.
type seg struct {
	parent  int32
	index   int32 // -1 for a key
	key     string
	escaped bool // key holds escapes and must be decoded to spell the path
}

// maxDepth bounds nesting, as encoding/json does, so a hostile document cannot exhaust the stack.
const maxDepth = 10000

// syntaxError says where a document stops being JSON, never what it holds.
type syntaxError struct {
	offset int
	msg    string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("the content is not valid JSON: %s at byte %d", e.msg, e.offset)
}

// reset empties the walker, dropping every reference into the last document.
func (w *walker) reset() {
	clear(w.leaves)
	clear(w.segs)
	w.doc, w.leaves, w.segs, w.textBytes = "", w.leaves[:0], w.segs[:0], 0
}

// walk collects the string leaves of doc. It accepts any JSON value at the top, checks the
// structure strictly, and is lenient only about control characters inside strings.
func (w *walker) walk(doc string) error {
	w.reset()
	w.doc = doc
	i, err := w.value(skipSpace(doc, 0), -1, 0)
	if err != nil {
		return err
	}
	if i = skipSpace(doc, i); i != len(doc) {
		return &syntaxError{i, "data after the value"}
	}
	return nil
}

// single makes text the only leaf, for CheckText.
func (w *walker) single(text string) {
	w.reset()
	w.doc = text
	w.leaves = append(w.leaves, leaf{text: text, start: 0, end: len(text), seg: -1})
	w.textBytes = len(text)
}

func (w *walker) value(i int, path int32, depth int) (int, error) {
	d := w.doc
	if i >= len(d) {
		return i, &syntaxError{i, "unexpected end"}
	}
	switch c := d[i]; {
	case c == '"':
		end, escaped, err := stringEnd(d, i)
		if err != nil {
			return i, err
		}
		text := d[i+1 : end-1]
		if escaped {
			if text, err = unquote(text, i); err != nil {
				return i, err
			}
		}
		if text != "" {
			w.leaves = append(w.leaves, leaf{text: text, start: i, end: end, seg: path})
			w.textBytes += len(text)
		}
		return end, nil
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return i, &syntaxError{i, "nesting deeper than " + strconv.Itoa(maxDepth)}
		}
		if c == '{' {
			return w.object(i, path, depth+1)
		}
		return w.array(i, path, depth+1)
	case c == 't':
		return literal(d, i, "true")
	case c == 'f':
		return literal(d, i, "false")
	case c == 'n':
		return literal(d, i, "null")
	case c == '-' || isDigit(c):
		j := i + 1
		for j < len(d) && (isDigit(d[j]) || d[j] == '.' || d[j] == 'e' || d[j] == 'E' || d[j] == '+' || d[j] == '-') {
			j++
		}
		if c == '-' && j == i+1 {
			return i, &syntaxError{i, "a number without digits"}
		}
		return j, nil
	}
	return i, &syntaxError{i, "unexpected character"}
}

func (w *walker) object(i int, path int32, depth int) (int, error) {
	d := w.doc
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return i, &syntaxError{i, "expected a key"}
		}
		end, escaped, err := stringEnd(d, i)
		if err != nil {
			return i, err
		}
		key := d[i+1 : end-1]
		if i = skipSpace(d, end); i >= len(d) || d[i] != ':' {
			return i, &syntaxError{i, "expected ':'"}
		}
		// The key's step is kept only if something below it turned out to be a leaf.
		n, nl := len(w.segs), len(w.leaves)
		w.segs = append(w.segs, seg{parent: path, index: -1, key: key, escaped: escaped})
		if i, err = w.value(skipSpace(d, i+1), int32(n), depth); err != nil {
			return i, err
		}
		if len(w.leaves) == nl {
			w.segs = w.segs[:n]
		}
		if i = skipSpace(d, i); i < len(d) && d[i] == ',' {
			i = skipSpace(d, i+1)
			continue
		}
		if i < len(d) && d[i] == '}' {
			return i + 1, nil
		}
		return i, &syntaxError{i, "expected ',' or '}'"}
	}
}

func (w *walker) array(i int, path int32, depth int) (int, error) {
	d := w.doc
	if i = skipSpace(d, i+1); i < len(d) && d[i] == ']' {
		return i + 1, nil
	}
	for index := int32(0); ; index++ {
		n, nl := len(w.segs), len(w.leaves)
		w.segs = append(w.segs, seg{parent: path, index: index})
		var err error
		if i, err = w.value(i, int32(n), depth); err != nil {
			return i, err
		}
		if len(w.leaves) == nl {
			w.segs = w.segs[:n]
		}
		if i = skipSpace(d, i); i < len(d) && d[i] == ',' {
			i = skipSpace(d, i+1)
			continue
		}
		if i < len(d) && d[i] == ']' {
			return i + 1, nil
		}
		return i, &syntaxError{i, "expected ',' or ']'"}
	}
}

func literal(d string, i int, word string) (int, error) {
	if !strings.HasPrefix(d[i:], word) {
		return i, &syntaxError{i, "unexpected character"}
	}
	return i + len(word), nil
}

func skipSpace(d string, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// stringEnd returns the offset just past the closing quote of the string literal at d[i], and
// whether the literal holds escapes.
func stringEnd(d string, i int) (end int, escaped bool, err error) {
	j := i + 1
	for {
		k := strings.IndexByte(d[j:], '"')
		if k < 0 {
			return 0, false, &syntaxError{i, "unterminated string"}
		}
		q := j + k
		if strings.IndexByte(d[j:q], '\\') >= 0 {
			escaped = true
			// The quote is escaped when an odd number of backslashes precede it.
			n := 0
			for p := q - 1; p > i && d[p] == '\\'; p-- {
				n++
			}
			if n%2 == 1 {
				j = q + 1
				continue
			}
		}
		return q + 1, escaped, nil
	}
}

// unquote decodes the escapes of a string literal's contents (offset locates it for errors). A
// lone surrogate becomes U+FFFD, as in encoding/json.
func unquote(s string, offset int) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		k := strings.IndexByte(s[i:], '\\')
		if k < 0 {
			b.WriteString(s[i:])
			break
		}
		b.WriteString(s[i : i+k])
		i += k
		if i+1 >= len(s) {
			return "", &syntaxError{offset, "bad escape"}
		}
		switch c := s[i+1]; c {
		case '"', '\\', '/':
			b.WriteByte(c)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				return "", &syntaxError{offset, "bad \\u escape"}
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					r2, ok = hex4(s, i+2)
				}
				if pair := utf16.DecodeRune(r, r2); ok && pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b.WriteRune(r)
			continue
		default:
			return "", &syntaxError{offset, "bad escape"}
		}
		i += 2
	}
	return b.String(), nil
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// texts makes each non-empty text a leaf named by its own path, for CheckTexts.
func (w *walker) texts(texts []Text) {
	w.reset()
	for i, t := range texts {
		if t.Text == "" {
			continue
		}
		w.leaves = append(w.leaves, leaf{text: t.Text, start: i, seg: -1, named: t.Path})
		w.textBytes += len(t.Text)
	}
}

// leafPath is what a finding in leaf li names: the caller's path, or the JSON pointer.
func (w *walker) leafPath(li int) string {
	if lf := &w.leaves[li]; lf.named != "" {
		return lf.named
	}
	return w.path(w.leaves[li].seg)
}

// path spells the JSON pointer (RFC 6901) of a leaf's step.
func (w *walker) path(s int32) string {
	if s < 0 {
		return ""
	}
	var stack [32]int32
	ids := stack[:0]
	for ; s >= 0; s = w.segs[s].parent {
		ids = append(ids, s)
	}
	var b strings.Builder
	for k := len(ids) - 1; k >= 0; k-- {
		sg := w.segs[ids[k]]
		b.WriteByte('/')
		if sg.index >= 0 {
			b.WriteString(strconv.Itoa(int(sg.index)))
			continue
		}
		key := sg.key
		if sg.escaped {
			key, _ = unquote(key, 0)
		}
		if strings.ContainsAny(key, "~/") {
			key = strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
		}
		b.WriteString(key)
	}
	return b.String()
}
