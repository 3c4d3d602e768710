package policies

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlFile is a policy or test file being read: its text, for positions, and the problems
// found so far.
type yamlFile struct {
	path     string
	lines    []string
	root     *yaml.Node // the document's top-level node
	problems []Problem
}

// yamlLineRE finds the line yaml.v3 puts in its messages ("yaml: line 3: ...", "line 3: ...").
var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// readYAML reads path and decodes it strictly (unknown keys, duplicate keys and wrong types are
// problems) into v, keeping the node tree for positions. The returned file's root is nil when
// the file cannot be read or parsed at all; its problems say why.
func readYAML(path string, v any) *yamlFile {
	f := &yamlFile{path: path}
	data, err := os.ReadFile(path)
	if err != nil {
		f.problems = append(f.problems, Problem{File: path, Msg: fmt.Sprintf("cannot read the file: %v", err), Rule: -1})
		return f
	}
	f.lines = strings.Split(string(data), "\n")
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		f.yamlError(err)
		return f
	}
	if len(doc.Content) == 0 {
		f.problemf(0, 0, "the file is empty")
		return f
	}
	f.root = doc.Content[0]
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		f.yamlError(err)
	}
	return f
}

// yamlError records the messages of a yaml.v3 error, each at its line.
func (f *yamlFile) yamlError(err error) {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	for _, msg := range msgs {
		line := 0
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		msg = strings.TrimPrefix(msg, "yaml: ")
		f.problemf(line, 0, "%s", msg)
	}
}

func (f *yamlFile) problemf(line, col int, format string, args ...any) {
	f.problems = append(f.problems, Problem{File: f.path, Line: line, Column: col, Msg: fmt.Sprintf(format, args...), Rule: -1})
}

func (f *yamlFile) err() error {
	if len(f.problems) == 0 {
		return nil
	}
	return &Problems{List: f.problems}
}

// items returns the elements of the top-level key's sequence, or nil.
func (f *yamlFile) items(key string) []*yaml.Node {
	seq := valueOf(f.root, key)
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return nil
	}
	items := make([]*yaml.Node, len(seq.Content))
	for i, n := range seq.Content {
		items[i] = resolve(n)
	}
	return items
}

// valueOf returns the value of key in mapping n, or nil; aliases are followed.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// lineOf returns the line of key in mapping n, or of n itself when key is absent.
func lineOf(n *yaml.Node, key string) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i].Line
			}
		}
	}
	return n.Line
}

// scalarStart returns where the text of scalar n starts in the file, and for block scalars (|
// and >) the segments mapping each of its lines to the file, so that a problem on any line of a
// multi-line expression is reported where it is written.
func (f *yamlFile) scalarStart(n *yaml.Node) (line, col int, segs []segment) {
	switch n.Style {
	case yaml.LiteralStyle, yaml.FoldedStyle:
		segs = f.blockSegments(n)
		if len(segs) == 0 {
			return n.Line + 1, n.Column, nil
		}
		return segs[0].line, segs[0].col, segs
	case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
		return n.Line, n.Column + 1, nil
	default:
		return n.Line, n.Column, nil
	}
}

// blockSegments finds the lines of block scalar n's value in the file: each non-blank line of
// the text after the indicator line, stripped of its indentation, must appear next in the value
// with only whitespace skipped (a folded scalar turns line breaks into spaces). It stops at the
// first line that does not, which is where the block ends.
func (f *yamlFile) blockSegments(n *yaml.Node) []segment {
	v := n.Value
	end := len(strings.TrimRight(v, " \t\r\n"))
	var segs []segment
	cursor := 0
	for l := n.Line + 1; l <= len(f.lines) && cursor < end; l++ {
		raw := strings.TrimRight(f.lines[l-1], " \t\r")
		text := strings.TrimLeft(raw, " ")
		if text == "" {
			continue
		}
		idx := strings.Index(v[cursor:], text)
		if idx < 0 || strings.TrimSpace(v[cursor:cursor+idx]) != "" {
			break
		}
		segs = append(segs, segment{off: cursor + idx, line: l, col: len(raw) - len(text) + 1})
		cursor += idx + len(text)
	}
	return segs
}
