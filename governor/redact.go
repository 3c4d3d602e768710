package governor

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Redacted replaces the value of a redacted argument in the audit log.
const Redacted = "[REDACTED]"

// Redactor removes the values of sensitive argument keys before arguments are written to the
// audit log (audit.redact_keys). A key matches when, lower-cased, it contains one of the keys.
type Redactor struct {
	keys [][]byte // lower-cased
}

// NewRedactor is a redactor for keys (matched case-insensitively as substrings).
func NewRedactor(keys []string) *Redactor {
	r := &Redactor{}
	for _, k := range keys {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
			r.keys = append(r.keys, []byte(k))
		}
	}
	return r
}

// Redact returns args with the values of matching keys, at any depth, replaced by Redacted.
// Arguments that cannot hold such a key are returned as they are, without decoding; arguments
// that are not valid JSON are returned whole as a JSON string, since the audit log must stay
// valid JSON.
func (r *Redactor) Redact(args json.RawMessage) json.RawMessage {
	if !r.mayMatch(args) {
		return args
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		b, _ := json.Marshal(string(args))
		return b
	}
	out, err := json.Marshal(r.walk(v))
	if err != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	return out
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
	lower := bytes.ToLower(args)
	for _, k := range r.keys {
		if bytes.Contains(lower, k) {
			return true
		}
	}
	return false
}

func (r *Redactor) walk(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, val := range v {
			if r.matches(k) {
				v[k] = Redacted
			} else {
				v[k] = r.walk(val)
			}
		}
	case []any:
		for i, val := range v {
			v[i] = r.walk(val)
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
