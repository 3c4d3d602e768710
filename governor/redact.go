package governor

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// Redacted replaces the value of a redacted argument in the audit log.
const Redacted = "[REDACTED]"

// Redactor removes the values of sensitive argument keys before arguments are written to the
// audit log (audit.redact_keys), and cuts values too long to keep whole (audit.max_value_bytes).
// A key matches when, lower-cased, it contains one of the keys.
type Redactor struct {
	keys     [][]byte    // lower-cased
	maxValue int         // longest string, number or key kept whole, in bytes
	guards   *guards.Set // the tool_call guards, for what they would remove (withhold.go); may be nil
	records  *guards.Set // their log_only guards, enforced, for what is written down; may be nil
}

// maxArgsFactor bounds the whole of the stored arguments at this many times maxValue: many short
// values can add up too.
const maxArgsFactor = 16

// NewRedactor is a redactor for keys (matched case-insensitively as substrings) that keeps
// values of up to config.DefaultAuditMaxValueBytes whole.
func NewRedactor(keys []string) *Redactor {
	r := &Redactor{maxValue: config.DefaultAuditMaxValueBytes}
	for _, k := range keys {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
			r.keys = append(r.keys, []byte(k))
		}
	}
	return r
}

// NewAuditRedactor is the redactor of a loaded audit section: its redact_keys and its
// max_value_bytes.
func NewAuditRedactor(a config.Audit) *Redactor {
	r := NewRedactor(a.RedactKeys)
	if a.MaxValueBytes > 0 {
		r.maxValue = a.MaxValueBytes
	}
	return r
}

// Redact returns args with the values of matching keys, at any depth, replaced by Redacted, and
// every string, number or key longer than the redactor's bound cut by [store.TruncateString]
// (a prefix, then the original length and SHA-256). Arguments whose encoding is still longer
// than 16 times the bound are returned as one such cut JSON string. Arguments that can hold
// neither a matching key nor a long value are returned as they are, without decoding; arguments
// that are not valid JSON are returned as a (cut) JSON string, since the audit log must stay
// valid JSON.
func (r *Redactor) Redact(args json.RawMessage) json.RawMessage {
	if !r.mayMatch(args) && len(args) <= r.maxValue {
		return args
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return r.cutWhole(string(args))
	}
	out, err := json.Marshal(r.walk(v))
	if err != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	if len(out) > maxArgsFactor*r.maxValue {
		return r.cutWhole(string(out))
	}
	return out
}

// cutWhole stores text as one JSON string, cut to the redactor's bound.
func (r *Redactor) cutWhole(text string) json.RawMessage {
	b, _ := json.Marshal(store.TruncateString(text, r.maxValue))
	return b
}

// mayMatch is the cheap test: a key can only match if its text appears in the raw JSON, unless
// the JSON spells keys with \u escapes, which are then decoded and checked the slow way.
func (r *Redactor) mayMatch(args json.RawMessage) bool {
	if len(r.keys) == 0 {
		return false
	}
	if bytes.Contains(args, []byte(`\u`)) {
		return true
	}
	lower := lowerASCII(args)
	for _, k := range r.keys {
		if bytes.Contains(lower, k) {
			return true
		}
	}
	return false
}

// lowerASCII is bytes.ToLower(b) without a copy when b is ASCII with no upper-case letter,
// as most arguments are.
func lowerASCII(b []byte) []byte {
	for _, c := range b {
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return bytes.ToLower(b)
		}
	}
	return b
}

func (r *Redactor) walk(v any) any {
	switch v := v.(type) {
	case map[string]any:
		// A new map: a cut key is a new key, which ranging over v might visit again. The
		// marker carries the key's digest, so two long keys stay apart.
		out := make(map[string]any, len(v))
		for k, val := range v {
			if r.matches(k) {
				val = Redacted
			} else {
				val = r.walk(val)
			}
			out[store.TruncateString(k, r.maxValue)] = val
		}
		return out
	case []any:
		for i, val := range v {
			v[i] = r.walk(val)
		}
	case string:
		return store.TruncateString(v, r.maxValue)
	case json.Number:
		if len(v) > r.maxValue {
			return store.TruncateString(string(v), r.maxValue)
		}
	}
	return v
}

func (r *Redactor) matches(key string) bool {
	lower := []byte(strings.ToLower(key))
	for _, k := range r.keys {
		if bytes.Contains(lower, k) {
			return true
		}
	}
	return false
}

// Secrets returns the string forms of the values under matching keys in args, so that text
// derived from the arguments (a validation message quoting a value) can be scrubbed of them.
func (r *Redactor) Secrets(args json.RawMessage) []string {
	if !r.mayMatch(args) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	var out []string
	r.collect(v, false, &out)
	return out
}

func (r *Redactor) collect(v any, under bool, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			r.collect(val, under || r.matches(k), out)
		}
	case []any:
		for _, val := range v {
			r.collect(val, under, out)
		}
	case string:
		if under && v != "" {
			*out = append(*out, v)
			if b, err := json.Marshal(v); err == nil && len(b) > 2 && string(b[1:len(b)-1]) != v {
				*out = append(*out, string(b[1:len(b)-1]))
			}
		}
	case json.Number:
		if under {
			*out = append(*out, v.String())
		}
	}
}

// Scrub replaces every occurrence of the secrets in text with Redacted.
func Scrub(text string, secrets []string) string {
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, Redacted)
	}
	return text
}
