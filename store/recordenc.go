package store

import "github.com/mcp-gateway/mcp-gateway/internal/wirejson"

// appendBody appends what json.Marshal writes for r between `{"seq":0` and `,"hash":""}` (r's
// Seq, Prev and Hash are zero: encode sets them so) and returns where the arguments' value goes
// (after `,"args":`), or -1 when r has none. It writes the fields in the order of Record's and
// each value as encoding/json does: strings with json.Marshal's escaping
// (wirejson.AppendString), the time as time.Time.MarshalJSON, the duration as its float
// encoder. ok is false for a record it does not encode (one with a Model or a Detail, whose
// values are any JSON, or a time MarshalJSON refuses); encode then falls back to json.Marshal.
// A call's record has neither, and this is the cost per call that matters (issue 17):
// reflection over the record was a tenth of the in-process chain's CPU. A record's stored
// bytes are json.Marshal's (TestSealWritesWhatMarshalWrites), whichever encoder wrote them;
// TestAppendBodyIsMarshal and FuzzAppendBody hold this one to that, byte for byte.
func appendBody(b []byte, r *Record) (_ []byte, argsAt int, ok bool) {
	if r.Model != nil || r.Detail != nil {
		return b, -1, false
	}
	// AppendText is MarshalJSON's RFC 3339 without the quotes, refusing the same times (and
	// returning nil for them).
	withTime, err := r.Time.AppendText(append(b, `,"time":"`...))
	if err != nil {
		return b, -1, false
	}
	b = withTime
	b = append(b, `","type":`...)
	b = wirejson.AppendString(b, r.Type, true)
	b = appendField(b, `,"principal":`, r.Principal)
	b = appendField(b, `,"session":`, r.Session)
	b = appendField(b, `,"server":`, r.Server)
	b = appendField(b, `,"tool":`, r.Tool)
	b = appendField(b, `,"call_id":`, r.CallID)
	b = appendField(b, `,"trace_id":`, r.TraceID)
	b = appendField(b, `,"span_id":`, r.SpanID)
	argsAt = -1
	if len(r.Args) > 0 {
		b = append(b, argsField...)
		argsAt = len(b)
	}
	b = appendField(b, `,"args_digest":`, r.ArgsDigest)
	b = appendField(b, `,"decision":`, r.Decision)
	b = appendField(b, `,"kind":`, r.Kind)
	b = appendField(b, `,"outcome":`, r.Outcome)
	b = appendField(b, `,"reason":`, r.Reason)
	b = appendField(b, `,"run_id":`, r.RunID)
	if r.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		b = wirejson.AppendFloat(b, r.DurationMS) // finite: encode makes it so
	}
	b = appendField(b, `,"action":`, r.Action)
	return b, argsAt, true
}

// appendField appends name and s unless s is empty (omitempty).
func appendField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return wirejson.AppendString(append(b, name...), s, true)
}

// bodySize is about what appendBody writes for r, unless its texts need escapes: the buffer is
// allocated once.
func bodySize(r *Record) int {
	return 240 + len(r.Type) + len(r.Principal) + len(r.Session) + len(r.Server) + len(r.Tool) + len(r.CallID) +
		len(r.TraceID) + len(r.SpanID) + len(r.ArgsDigest) + len(r.Decision) + len(r.Kind) + len(r.Outcome) +
		len(r.Reason) + len(r.RunID) + len(r.Action)
}
