package guards

import (
	"cmp"
	"context"
	"slices"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// topic.deny flags text that mentions a denied topic, by keywords, and blocks by default. A
// keyword matches whole words only ("arm" is not in "harmless" or "arm_joint"), in any case,
// with Unicode letters, digits and marks as word characters; a keyword of several words
// matches them in order with any spaces or punctuation between. The finding's category is the
// topic. When keywords of two topics match at the same place, the keyword with more words
// wins, then the topic first in alphabetical order. Scripts written without spaces between
// words (Chinese, Japanese, Thai) are not split into words, so their keywords rarely match.

// TopicDenySettings are the settings of topic.deny.
type TopicDenySettings struct {
	// Topics maps each topic name to its keywords.
	Topics map[string][]string `yaml:"topics" json:"topics" jsonschema:"required,description=Topic name to its keywords\\, e.g. {weapons: [gun\\, rifle]}."`
	// Replacement is the redaction text, used with action: redact.
	Replacement *string `yaml:"replacement" json:"replacement,omitempty" jsonschema:"description=Redaction text used with action: redact (default [REDACTED])."`
}

type topicKeyword struct {
	rest  []string // the folded words after the first
	topic string
}

type topicDeny struct {
	first       map[string][]topicKeyword // folded first word → keywords, more words first
	asciiLen    [256]uint64               // asciiLen[b] has bit n if an ASCII first word of n bytes starts with b
	maxLen      int                       // longest folded first word, in bytes
	replacement string
}

func newTopicDeny(node *yaml.Node) (Guard, error) {
	var s TopicDenySettings
	if err := decodeSettings(node, &s); err != nil {
		return nil, err
	}
	var errs SettingErrors
	g := &topicDeny{first: map[string][]topicKeyword{}, replacement: defaultReplacement}
	if s.Replacement != nil {
		g.replacement = *s.Replacement
	}
	if len(s.Topics) == 0 {
		errs.add(lineOf(node, "topics"), "topics: name at least one topic with its keywords")
	}
	topics := make([]string, 0, len(s.Topics))
	for t := range s.Topics {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	topicsNode := valueOf(node, "topics")
	for _, t := range topics {
		if len(s.Topics[t]) == 0 {
			errs.add(lineOf(topicsNode, t), "topic %q has no keywords", t)
		}
		for i, kw := range s.Topics[t] {
			words := splitWords(kw)
			if len(words) == 0 {
				errs.add(itemLine(topicsNode, t, i), "keyword %q of topic %q has no letters or digits", kw, t)
				continue
			}
			f := words[0]
			g.first[f] = append(g.first[f], topicKeyword{rest: words[1:], topic: t})
			g.maxLen = max(g.maxLen, len(f))
			if isASCII(f) && len(f) < 64 {
				g.asciiLen[f[0]] |= 1 << len(f)
			}
		}
	}
	for f, kws := range g.first {
		slices.SortStableFunc(kws, func(a, b topicKeyword) int { return cmp.Compare(len(b.rest), len(a.rest)) })
		g.first[f] = kws
	}
	return g, errs.err()
}

func (g *topicDeny) DefaultAction() Action { return ActionBlock }

// Stages: what users and models say (the task, the answer, arguments) and what tools return;
// not tool definitions.
func (g *topicDeny) Stages() []Stage { return stagesExcept(StageToolDefinition) }

func (g *topicDeny) Redact(text string, spans []Span) string {
	return Redact(text, spans, fixed(g.replacement))
}

func (*topicDeny) pollsContext() {}

func (g *topicDeny) Scan(_ context.Context, text string) ([]Span, error) {
	var found []Span
	var buf [64]byte
	for i := 0; i < len(text); {
		start, end, ascii := nextWord(text, i)
		if start < 0 {
			break
		}
		i = end
		if ascii {
			if n := end - start; n >= 64 || g.asciiLen[lower(text[start])]&(1<<n) == 0 {
				continue
			}
		}
		folded, ok := foldInto(buf[:0], text[start:end], g.maxLen)
		if !ok {
			continue
		}
		for _, kw := range g.first[string(folded)] {
			if e := matchRest(text, end, kw.rest); e > 0 {
				found = append(found, Span{Start: start, End: e, Category: kw.topic})
				i = e
				break
			}
		}
	}
	return found, nil
}

// matchRest matches the folded words of a keyword after the first, from offset i, and returns
// where the last ends (or i when there are none), or 0.
func matchRest(text string, i int, rest []string) int {
	for _, w := range rest {
		start, end, _ := nextWord(text, i)
		if start < 0 || !foldEqual(text[start:end], w) {
			return 0
		}
		i = end
	}
	return i
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return isWordByte(byte(r))
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// nextWord finds the first word at or after i: its offsets and whether it is all ASCII.
// start is -1 when there is none.
func nextWord(text string, i int) (start, end int, ascii bool) {
	for i < len(text) {
		if c := text[i]; c < utf8.RuneSelf {
			if isWordByte(c) {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if isWordRune(r) {
			break
		}
		i += size
	}
	if i >= len(text) {
		return -1, -1, false
	}
	start, ascii = i, true
	for i < len(text) {
		if c := text[i]; c < utf8.RuneSelf {
			if !isWordByte(c) {
				break
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if !isWordRune(r) {
			break
		}
		ascii = false
		i += size
	}
	return start, i, ascii
}

// foldRune maps a character to the form case-insensitive matching compares: upper then lower
// case, so that forms such as the final sigma and the Kelvin sign meet their letter.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(lower(byte(r)))
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// foldInto appends the folded form of word to b; false when it would be longer than limit.
func foldInto(b []byte, word string, limit int) ([]byte, bool) {
	for _, r := range word {
		b = utf8.AppendRune(b, foldRune(r))
		if len(b) > limit {
			return b, false
		}
	}
	return b, true
}

// foldEqual reports whether word folds to folded.
func foldEqual(word, folded string) bool {
	var buf [utf8.UTFMax]byte
	j := 0
	for _, r := range word {
		n := utf8.EncodeRune(buf[:], foldRune(r))
		if j+n > len(folded) || string(buf[:n]) != folded[j:j+n] {
			return false
		}
		j += n
	}
	return j == len(folded)
}

// splitWords splits a keyword into its folded words.
func splitWords(kw string) []string {
	var words []string
	for i := 0; i < len(kw); {
		start, end, _ := nextWord(kw, i)
		if start < 0 {
			break
		}
		f, _ := foldInto(nil, kw[start:end], len(kw)*utf8.UTFMax)
		words = append(words, string(f))
		i = end
	}
	return words
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
