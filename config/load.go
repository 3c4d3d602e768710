package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the configuration file at path and parses it with Parse. A file that cannot be
// read is reported as the *os.PathError; every problem in its content as *Errors.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse decodes data, the content of the configuration file at path, strictly, checks it and
// applies the defaults. Relative paths in the file (state_dir, cwd, a command with a slash) are
// resolved against the directory of path.
//
// On any problem it returns nil and an *Errors listing every problem with its line; only a YAML
// syntax error stops the search early, since nothing after it can be trusted.
func Parse(path string, data []byte) (*Config, error) {
	return ParseWith(path, data, Options{})
}

// LoadWith is Load with the further checks of o.
func LoadWith(path string, o Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseWith(path, data, o)
}

// ParseWith is Parse with the further checks of o, whose problems are listed with the file's.
func ParseWith(path string, data []byte, o Options) (*Config, error) {
	d := newDecoder(path)
	d.data = data
	root := d.document(data)
	cfg := &Config{Path: path}
	// After an alias bomb the decoded values are partial; checking them would only add noise.
	if root != nil && d.decodeRoot(root, cfg) && !d.tooMany {
		d.check(cfg)
		// The llm section must be a mapping: otherwise it holds nothing to build a model from.
		if top := d.src[cfg]; o.CheckLLM != nil && top != nil && top.given("llm") && d.src[&cfg.LLM] != nil {
			for _, p := range o.CheckLLM(&cfg.LLM) {
				if d.reportedInLLM(p.Key) {
					continue
				}
				loc := location{path: "llm"}
				if p.Key != "" {
					loc = loc.field(p.Key)
				}
				d.errorf(cfg.LLM.Line(p.Key), loc, "%s", p.Msg)
			}
		}
		if o.CheckGuardrails != nil {
			d.guardrailProblems(cfg, o.CheckGuardrails)
		}
		if o.CheckPolicies != nil && d.policiesChecked(cfg) {
			d.policyProblems(cfg, o.CheckPolicies)
		}
	}
	if len(d.errs.List) > 0 {
		d.errs.sort(d.file)
		return nil, &d.errs
	}
	return cfg, nil
}

// document parses data into the root node of its single YAML document. It returns nil, with the
// problem recorded, when data is not YAML or holds more than one document.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		d.errorf(0, location{}, "the file is empty; it needs at least a servers list")
		return nil
	case err != nil:
		d.syntaxError(err, data)
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntaxError(err, data)
		return nil
	default:
		d.errorf(next.Line, location{}, "a second YAML document starts here; the file holds exactly one configuration")
		return nil
	}
	if len(doc.Content) != 1 {
		d.errorf(doc.Line, location{}, "the file holds no configuration")
		return nil
	}
	return doc.Content[0]
}

var (
	yamlLine      = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`unknown anchor '(.*)' referenced`)
)

// parserProblems are the problems yaml.v3's parser (as opposed to its scanner) reports. For them
// it prints a 0-based line: the line where the unfinished construct began, or where the problem
// is when that construct began on the first line.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxError records a YAML syntax error at the 1-based line it belongs to.
func (d *decoder) syntaxError(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	switch {
	case parserProblems[msg]:
		line++
	case line == 0 && unknownAnchor.MatchString(msg):
		line = lineOf(data, "*"+unknownAnchor.FindStringSubmatch(msg)[1])
	case line == 0:
		line = 1
	}
	// At the end of a file without a final line break the parser counts one line more.
	d.errorf(min(line, countLines(data)), location{}, "invalid YAML: %s", msg)
}

// countLines counts the lines of data as YAML does: \n, \r\n and \r end a line, and so do
// NEL, LS and PS.
func countLines(data []byte) int {
	lines := 1
	for i := 0; i < len(data); i++ {
		switch {
		case data[i] == '\n',
			data[i] == '\r' && (i+1 == len(data) || data[i+1] != '\n'),
			bytes.HasPrefix(data[i:], []byte("\u0085")),
			bytes.HasPrefix(data[i:], []byte("\u2028")),
			bytes.HasPrefix(data[i:], []byte("\u2029")):
			if i+1 < len(data) {
				lines++
			}
		}
	}
	return lines
}

// lineOf is the 1-based line of the first occurrence of s in data, or 0.
func lineOf(data []byte, s string) int {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 0
	}
	return 1 + bytes.Count(data[:i], []byte("\n"))
}

// decodeRoot decodes the top-level mapping into cfg and reports whether it was a mapping, so
// that there is something to check.
func (d *decoder) decodeRoot(root *yaml.Node, cfg *Config) bool {
	n := d.resolve(root)
	switch {
	case n == nil:
		return false
	case isNull(n):
		d.errorf(n.Line, location{}, "the file holds no configuration; it needs at least a servers list")
		return false
	case n.Kind != yaml.MappingNode:
		d.errorf(n.Line, location{}, "the file must be a mapping with the keys gateway and servers, not %s", describe(n))
		return false
	}
	d.value(n, reflect.ValueOf(cfg).Elem(), location{})
	return true
}

// reportedInLLM reports whether a problem was already found with the llm setting at path, or
// with one inside it or around it (a value that did not decode leaves its setting zero, which
// would only repeat the problem). Problems of the section itself (an unknown key) do not count.
func (d *decoder) reportedInLLM(path string) bool {
	for _, e := range d.llmErrors {
		if e != "" && (related(e, path) || related(path, e)) {
			return true
		}
	}
	return false
}

// related reports whether the setting at path inner is the one at outer or inside it.
func related(outer, inner string) bool {
	return strings.HasPrefix(inner, outer) && (len(inner) == len(outer) || inner[len(outer)] == '.' || inner[len(outer)] == '[')
}
