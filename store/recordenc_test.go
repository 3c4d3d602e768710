package store

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// marshalledBody is what encode's fallback takes from json.Marshal for r: its encoding with
// Seq, Prev and Hash zero, without `{"seq":0` and `,"hash":""}`, and split where the
// arguments go.
func marshalledBody(t testing.TB, r Record) (head, rest string, ok bool) {
	t.Helper()
	r.Seq, r.Prev, r.Hash = 0, "", ""
	mark := len(r.Args) > 0
	if mark {
		r.Args = json.RawMessage(argsMark)
	}
	canon, err := json.Marshal(r)
	if err != nil {
		return "", "", false
	}
	if !bytes.HasPrefix(canon, []byte(seqStart)) || !bytes.HasSuffix(canon, []byte(hashEnd)) {
		t.Fatalf("json.Marshal = %s", canon)
	}
	body := string(canon[len(seqStart) : len(canon)-len(hashEnd)])
	if !mark {
		return body, "", true
	}
	at := strings.Index(body, argsField+argsMark) + len(argsField)
	return body[:at], body[at+len(argsMark):], true
}

// checkBody fails when appendBody writes anything but json.Marshal's bytes for r, or takes a
// record that json.Marshal cannot encode.
func checkBody(t testing.TB, r Record) {
	t.Helper()
	head, rest, marshalled := marshalledBody(t, r)
	body, at, ok := appendBody([]byte("x"), &r)
	if !ok {
		if r.Model == nil && r.Detail == nil && marshalled {
			t.Fatalf("appendBody refused a record json.Marshal encodes: %+v", r)
		}
		if string(body) != "x" {
			t.Fatalf("appendBody refused the record but wrote %q", body)
		}
		return
	}
	if !marshalled {
		t.Fatalf("appendBody encoded a record json.Marshal refuses: %+v", r)
	}
	body = body[1:]
	gotHead, gotRest := string(body), ""
	if at >= 0 {
		gotHead, gotRest = string(body[:at-1]), string(body[at-1:])
	} else if len(r.Args) > 0 {
		t.Fatal("appendBody gave no place for the arguments of a record that has some")
	}
	if gotHead != head || gotRest != rest {
		t.Fatalf("appendBody differs from json.Marshal for %+v:\n got  %s | %s\n want %s | %s", r, gotHead, gotRest, head, rest)
	}
}

// hostileText draws a string of the bytes encoding/json treats apart: control characters,
// quotes and backslashes, HTML's <, > and &, DEL, U+2028 and U+2029, invalid and cut UTF-8,
// and ordinary multi-byte characters.
func hostileText(rng *rand.Rand) string {
	pieces := []string{"a", "Z", " ", "\"", "\\", "<", ">", "&", "\x00", "\x1f", "\n", "\t", "\r", "\b", "\f", "\x7f",
		"\u2028", "\u2029", "\u2027", "\u202a", "é", "日本", "🤖", "\xff", "\xe2\x80", "\xe2", "\xc3", "\xed\xa0\x80", "\uFFFD", "/", "'"}
	n := rng.IntN(12)
	var b strings.Builder
	for range n {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func randomRecord(rng *rand.Rand) Record {
	text := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return hostileText(rng)
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", 0), time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -(9*3600 + 15*60)),
		time.FixedZone("secs", 3600+17), time.FixedZone("far", 25*3600)}
	year := 1 + rng.IntN(9998)
	switch rng.IntN(10) {
	case 0:
		year = -1 - rng.IntN(100)
	case 1:
		year = 10000 + rng.IntN(100)
	case 2:
		year = 0
	}
	tm := time.Date(year, time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e9)>>(rng.IntN(4)*8), zones[rng.IntN(len(zones))])
	if rng.IntN(8) == 0 {
		tm = time.Time{}
	}
	durations := []float64{0, math.Copysign(0, -1), 1, 0.5, 12.345, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e300, -3e-9, 5e-324, math.MaxFloat64,
		math.Float64frombits(rng.Uint64()), rng.Float64() * 1000, -rng.Float64()}
	dur := durations[rng.IntN(len(durations))]
	if math.IsNaN(dur) || math.IsInf(dur, 0) {
		dur = 0 // encode makes it so before appendBody sees it
	}
	args := []string{"", `{}`, `{"a":1}`, `[1,2]`, `"s"`, `{"x":"<&>"}`}
	r := Record{Time: tm, Type: text(), Principal: text(), Session: text(), Server: text(), Tool: text(), CallID: text(),
		TraceID: text(), SpanID: text(), ArgsDigest: text(), Decision: text(), Kind: text(), Outcome: text(), Reason: text(),
		RunID: text(), DurationMS: dur, Action: text(), EndsCall: text()}
	if a := args[rng.IntN(len(args))]; a != "" {
		r.Args = json.RawMessage(a)
	}
	switch rng.IntN(20) {
	case 0:
		r.Detail = map[string]any{"k": text()}
	case 1:
		r.Model = &ModelEvidence{}
	}
	return r
}

// TestAppendBodyIsMarshal: 20,000 records drawn to cover what encoding/json escapes, formats
// or refuses encode to json.Marshal's bytes, or are left to it.
func TestAppendBodyIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 2026))
	for range 20000 {
		checkBody(t, randomRecord(rng))
	}
	// A call's record as the governor writes it.
	checkBody(t, Record{Time: time.Date(2026, 12, 2, 5, 30, 0, 123456789, time.UTC), Type: RecordCall, Principal: "bench",
		Server: "arm", Tool: "arm__move", CallID: "c-1", Args: json.RawMessage(`{"speed":1.2}`), ArgsDigest: strings.Repeat("ab", 32),
		Decision: "allow", Outcome: "ok", DurationMS: 0.731, RunID: "run-7"})
}

// FuzzAppendBody: any texts, time and duration encode as json.Marshal encodes them.
func FuzzAppendBody(f *testing.F) {
	f.Add("call", "p<&>", "arm", "\u2028\xff", int64(1764654600123456789), 12.5, `{"a":1}`)
	f.Add("", "", "", "", int64(-62135596800000000), 1e-7, ``)
	f.Add("\x00\x7f\"\\", "日本🤖", "\xe2\x80", "x", int64(253402300800000000), 1e21, `[]`)
	f.Fuzz(func(t *testing.T, typ, principal, server, reason string, nanos int64, dur float64, args string) {
		if math.IsNaN(dur) || math.IsInf(dur, 0) {
			dur = 0
		}
		r := Record{Time: time.Unix(0, nanos).UTC(), Type: typ, Principal: principal, Server: server, Reason: reason, DurationMS: dur}
		if compact, ok := CompactJSON([]byte(args)); ok {
			r.Args = compact
		}
		checkBody(t, r)
	})
}

// TestAppendBodyWritesEveryField: a record with every field json.Marshal writes set, by
// reflection, encodes as json.Marshal encodes it, so that a field added to Record and not to
// appendBody fails here instead of being left out of every call's stored record. Model and
// Detail are the fallback's; Seq, Prev and Hash are the seal's.
func TestAppendBodyWritesEveryField(t *testing.T) {
	var r Record
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f, field := v.Type().Field(i), v.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-", "model", "detail", "seq", "prev", "hash":
			continue
		}
		switch {
		case f.Type == reflect.TypeFor[time.Time]():
			field.Set(reflect.ValueOf(time.Date(2026, 12, 2, 7, 0, 0, 5, time.UTC)))
		case f.Type == reflect.TypeFor[json.RawMessage]():
			field.Set(reflect.ValueOf(json.RawMessage(`{"k":"v"}`)))
		case f.Type.Kind() == reflect.String:
			field.SetString(name + " <value>")
		case f.Type.Kind() == reflect.Float64:
			field.SetFloat(1.5)
		default:
			t.Fatalf("Record.%s is a %s, which this test cannot fill: teach appendBody (or its fallback) and this test the field", f.Name, f.Type)
		}
	}
	checkBody(t, r)
}

// BenchmarkEncodeCallRecord: appendBody against json.Marshal on a call's record as the
// governor writes it (docs/benchmarks.md).
//
//	go test ./store -run '^$' -bench EncodeCallRecord -benchmem
func BenchmarkEncodeCallRecord(b *testing.B) {
	r := Record{Time: time.Date(2026, 12, 2, 5, 30, 0, 123456789, time.UTC), Type: RecordCall, Principal: "bench",
		Server: "arm", Tool: "arm__move", CallID: "c-1", Args: json.RawMessage(`{"speed":1.2}`), ArgsDigest: strings.Repeat("ab", 32),
		Decision: "allow", Outcome: "ok", Reason: "policy rule r1 allowed the call", DurationMS: 0.731, RunID: "run-7"}
	b.Run("appendBody", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, _, ok := appendBody(make([]byte, 0, bodySize(&r)), &r); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		m := r
		m.Args = json.RawMessage(argsMark)
		for range b.N {
			if _, err := json.Marshal(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
