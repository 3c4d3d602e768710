package guards

import (
	"context"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// size.limit flags text over a size and blocks by default. It measures each string leaf (and
// the text of CheckText): max_chars in Unicode code points, max_bytes in UTF-8 bytes; set one
// or both. The finding is the part past the limit (category max_chars or max_bytes, whichever
// cuts earlier), so redaction truncates there, always on a character boundary.

// SizeLimitSettings are the settings of size.limit.
type SizeLimitSettings struct {
	// MaxChars is the most code points a text may have; 0 means no limit.
	MaxChars int `yaml:"max_chars" json:"max_chars,omitempty" jsonschema:"minimum=1,description=Most characters (code points) in one text."`
	// MaxBytes is the most UTF-8 bytes a text may have; 0 means no limit.
	MaxBytes int `yaml:"max_bytes" json:"max_bytes,omitempty" jsonschema:"minimum=1,description=Most UTF-8 bytes in one text."`
}

type sizeLimit struct {
	maxChars, maxBytes int
}

func newSizeLimit(node *yaml.Node) (Guard, error) {
	var s SizeLimitSettings
	if err := decodeSettings(node, &s); err != nil {
		return nil, err
	}
	var errs SettingErrors
	if s.MaxChars < 0 {
		errs.add(lineOf(node, "max_chars"), "max_chars must be positive, not %d", s.MaxChars)
	}
	if s.MaxBytes < 0 {
		errs.add(lineOf(node, "max_bytes"), "max_bytes must be positive, not %d", s.MaxBytes)
	}
	if s.MaxChars == 0 && s.MaxBytes == 0 && len(errs) == 0 {
		errs.add(lineOf(node, ""), "set max_chars, max_bytes or both")
	}
	return &sizeLimit{maxChars: s.MaxChars, maxBytes: s.MaxBytes}, errs.err()
}

func (g *sizeLimit) DefaultAction() Action { return ActionBlock }
func (g *sizeLimit) Stages() []Stage       { return allStages }

// Redact truncates: the span runs to the end of the text and is replaced by nothing.
func (g *sizeLimit) Redact(text string, spans []Span) string {
	return Redact(text, spans, nil)
}

func (*sizeLimit) pollsContext() {}

func (g *sizeLimit) Scan(_ context.Context, text string) ([]Span, error) {
	cut, category := len(text), ""
	if g.maxBytes > 0 && len(text) > g.maxBytes {
		cut, category = runeFloor(text, g.maxBytes), "max_bytes"
	}
	// Counting code points is only needed when the bytes could exceed the limit.
	if g.maxChars > 0 && len(text) > g.maxChars {
		n, i := 0, 0
		for i < len(text) && n < g.maxChars {
			if text[i] < utf8.RuneSelf {
				i++
			} else {
				_, size := utf8.DecodeRuneInString(text[i:])
				i += size
			}
			n++
		}
		if i < len(text) && i < cut {
			cut, category = i, "max_chars"
		}
	}
	if category == "" {
		return nil, nil
	}
	return []Span{{Start: cut, End: len(text), Category: category}}, nil
}
