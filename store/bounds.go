package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Bounds of what one audit record keeps, so that a hostile or broken peer cannot grow the state
// file by the size of what it sends (SPEC.md §15, Bounded).
const (
	// MaxTextBytes bounds the Reason, every identifier (principal, session, server, tool, call
	// and run id, kind, outcome, decision, action) and every string inside Detail. A 1 MB
	// upstream error message becomes a 2 KiB reason ending in a [TruncateString] marker.
	MaxTextBytes = 2048
	// maxDetailBytes bounds the encoded Detail after its strings are cut; a Detail still larger
	// (many short strings) is stored as one cut string under "truncated".
	maxDetailBytes = 8 * MaxTextBytes
)

// TruncateString returns s when it is at most max bytes long. A longer s is cut to at most max
// bytes at a UTF-8 boundary and followed by a marker giving the original length and the SHA-256
// of the whole value, "…[truncated: 1048576 bytes, sha256:<64 hex digits>]", so the full value
// can still be matched against a copy kept elsewhere.
func TruncateString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%s…[truncated: %d bytes, sha256:%s]", s[:cut], len(s), hex.EncodeToString(sum[:]))
}

// boundRecord cuts the record's texts to MaxTextBytes at seal time. It changes nothing in a
// record within the bounds, and costs one encoding of Detail when there is one.
func boundRecord(r *Record) {
	for _, f := range []*string{&r.Principal, &r.Session, &r.Server, &r.Tool, &r.CallID, &r.TraceID, &r.SpanID,
		&r.Decision, &r.Kind, &r.Outcome, &r.Reason, &r.RunID, &r.Action} {
		*f = TruncateString(*f, MaxTextBytes)
	}
	r.Model = r.Model.bounded()
	if r.Detail == nil {
		return
	}
	enc, err := json.Marshal(r.Detail)
	if err != nil || len(enc) <= MaxTextBytes {
		// Nothing in it can be too long; an encoding error is seal's to handle.
		return
	}
	dec := json.NewDecoder(bytes.NewReader(enc))
	dec.UseNumber()
	var d map[string]any
	if dec.Decode(&d) != nil {
		return
	}
	d, _ = boundValue(d).(map[string]any)
	if enc, err = json.Marshal(d); err == nil && len(enc) > maxDetailBytes {
		d = map[string]any{"truncated": TruncateString(string(enc), MaxTextBytes)}
	}
	r.Detail = d
}

// boundValue cuts every string, number and key of a decoded JSON value to MaxTextBytes.
func boundValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			out[TruncateString(k, MaxTextBytes)] = boundValue(val)
		}
		return out
	case []any:
		for i, val := range v {
			v[i] = boundValue(val)
		}
	case string:
		return TruncateString(v, MaxTextBytes)
	case json.Number:
		if len(v) > MaxTextBytes {
			return TruncateString(string(v), MaxTextBytes)
		}
	}
	return v
}
