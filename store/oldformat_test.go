package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// oldRecord is a Record as it was stored before the JSON names were snake_case: the Go field
// names, every field present but Detail.
type oldRecord struct {
	Seq        uint64
	Time       time.Time
	Type       string
	Principal  string
	Session    string
	Server     string
	Tool       string
	CallID     string
	Args       json.RawMessage
	ArgsDigest string
	Decision   string
	Kind       string
	Outcome    string
	Reason     string
	RunID      string
	DurationMS float64
	Action     string
	Detail     map[string]any `json:",omitempty"`
	Prev       string
	Hash       string
}

// oldSeal is the stored form the earlier seal gave r: the hash over the encoding ending in
// `,"Hash":""}`, then written in.
func oldSeal(t *testing.T, r *oldRecord) []byte {
	t.Helper()
	r.Hash = ""
	canon, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(canon, []byte(`,"Hash":""}`)) {
		t.Fatalf("old encoding does not end with its hash field: %s", canon)
	}
	sum := sha256.Sum256(canon)
	r.Hash = hex.EncodeToString(sum[:])
	return append(canon[:len(canon)-2], []byte(r.Hash+`"}`)...)
}

// The state file of an earlier version, whose lockouts, approvals, pins, crash journal and audit
// records carry Go field names, reads the same as one written now; new records chain on to the
// old ones, `audit verify` passes on the mixed log, and an export has every record as stored.
func TestStateFileWrittenWithGoFieldNames(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	old := []oldRecord{
		{Seq: 1, Time: at, Type: RecordCall, Principal: "planner", Session: "s1", Server: "arm", Tool: "arm__move",
			CallID: "call-1", Args: json.RawMessage(`{"speed":0.4}`), ArgsDigest: "d1", Decision: "allow:default",
			Outcome: "ok", RunID: "run-1", DurationMS: 12.5},
		{Seq: 2, Time: at.Add(time.Second), Type: RecordLockout, Server: "arm", Tool: "arm__move", CallID: "call-2",
			Kind: "mcp_execution_status_unknown", Reason: "deadline passed", Detail: map[string]any{"deadline_ms": 500.0}},
	}
	const (
		lockout = `{"Server":"arm","Tool":"arm__move","CallID":"call-2","Principal":"planner","Session":"s1","Reason":"deadline passed","At":"2026-11-30T08:00:01Z"}`
		journal = `{"Server":"gripper","Tool":"gripper__close","CallID":"call-3","Principal":"planner","Session":"s1","Reason":"","At":"2026-11-30T08:00:02Z"}`
		request = `{"ID":"apr-1","Digest":"d-apr","Server":"arm","Tool":"arm__move","Principal":"planner","Session":"s1","Rule":"fast","Reason":"fast move",` +
			`"Args":{"speed":1.2},"Created":"2026-11-30T08:00:00Z","Expires":"2026-11-30T08:05:00Z","State":"denied",` +
			`"DecidedBy":"alice","DecisionReason":"someone is in the cell","Decided":"2026-11-30T08:01:00Z"}`
		pin = `{"Server":"arm","Tool":"move","Digest":"p1","Definition":{"name":"move"},"Pinned":"2026-11-30T08:00:00Z",` +
			`"Pending":"p2","PendingDefinition":{"name":"move","description":"changed"},"Changed":"2026-11-30T08:02:00Z"}`
	)
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var stored [][]byte
	err = db.Update(func(tx *bolt.Tx) error {
		prev := ""
		for i := range old {
			old[i].Prev = prev
			v := oldSeal(t, &old[i])
			prev = old[i].Hash
			stored = append(stored, v)
			if err := tx.Bucket(bucketAudit).Put(seqKey(old[i].Seq), v); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketLockouts).Put([]byte("arm"), []byte(lockout)); err != nil {
			return err
		}
		inflight, err := tx.CreateBucketIfNotExists(bucketInFlight)
		if err != nil {
			return err
		}
		if err := inflight.Put([]byte("call-3"), []byte(journal)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketApprovals).Put([]byte("apr-1"), []byte(request)); err != nil {
			return err
		}
		pins, err := tx.Bucket(bucketPins).CreateBucketIfNotExists([]byte("arm"))
		if err != nil {
			return err
		}
		return pins.Put([]byte("move"), []byte(pin))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, Options{})
	l, ok := s.Lockout("arm")
	if !ok || l.CallID != "call-2" || l.Principal != "planner" || l.Reason != "deadline passed" || !l.At.Equal(at.Add(time.Second)) {
		t.Errorf("old lockout read as %+v, %v", l, ok)
	}
	// The journal entry of a call in flight when the old gateway died became a lockout at Open.
	if l, ok := s.Lockout("gripper"); !ok || l.CallID != "call-3" || l.Tool != "gripper__close" {
		t.Errorf("old journal entry read as lockout %+v, %v", l, ok)
	}
	a, ok, err := s.GetApproval("apr-1")
	if err != nil || !ok || a.DecidedBy != "alice" || a.DecisionReason != "someone is in the cell" || a.Decided.IsZero() ||
		a.State != ApprovalDenied || string(a.Args) != `{"speed":1.2}` {
		t.Errorf("old approval read as %+v, %v, %v", a, ok, err)
	}
	p, ok, err := s.GetPin("arm", "move")
	if err != nil || !ok || p.Pending != "p2" || !strings.Contains(string(p.PendingDefinition), "changed") || p.Changed.IsZero() {
		t.Errorf("old pin read as %+v, %v, %v", p, ok, err)
	}

	// New records chain on to the old ones, in the new form.
	rec, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "move", 3))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Seq < 3 || rec.Prev == "" {
		t.Fatalf("new record %d links to %q", rec.Seq, rec.Prev)
	}
	if checked, bad := s.AuditVerify(); bad != nil || checked != rec.Seq {
		t.Fatalf("AuditVerify on the mixed log = %d, %v; want %d records intact", checked, bad, rec.Seq)
	}
	var recs []Record
	if err := s.AuditScan(AuditFilter{}, func(r Record) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != int(rec.Seq) || recs[0].CallID != "call-1" || recs[0].ArgsDigest != "d1" || recs[0].RunID != "run-1" ||
		recs[0].DurationMS != 12.5 || recs[0].Hash != old[0].Hash || recs[1].Kind != "mcp_execution_status_unknown" {
		t.Errorf("old records read as %+v", recs[:2])
	}
	last := recs[len(recs)-1]
	if last.CallID != "call-3" || last.RunID != "run-3" {
		t.Errorf("new record read as %+v", last)
	}

	// An export holds each record as stored: the old ones unchanged, the new ones snake_case,
	// and each line's hash recomputes from the line.
	var lines [][]byte
	if err := s.AuditExport(AuditFilter{}, func(raw []byte) error { lines = append(lines, raw); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lines[0], stored[0]) || !bytes.Equal(lines[1], stored[1]) {
		t.Errorf("old records exported as\n%s\n%s\nwant them as stored", lines[0], lines[1])
	}
	newLine := string(lines[len(lines)-1])
	if !strings.Contains(newLine, `"call_id":"call-3"`) || !strings.Contains(newLine, `,"hash":"`) || strings.Contains(newLine, `"CallID"`) {
		t.Errorf("new record exported as %s", newLine)
	}
	for i, line := range lines {
		if claimed, actual, ok := storedHash(line); !ok || claimed != actual {
			t.Errorf("exported line %d does not re-hash: %s", i+1, line)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Written again, the old lockout and approval are in the new form and still read the same.
	s = openStore(t, dir, Options{})
	if _, err := s.DecideApproval("apr-1", ApprovalApproved, "bob", "", time.Now()); err == nil {
		t.Error("an old denied request could be approved")
	}
	cleared, ok, err := s.ClearLockout("arm")
	if err != nil || !ok || cleared.CallID != "call-2" {
		t.Errorf("ClearLockout of the old lockout = %+v, %v, %v", cleared, ok, err)
	}
}

// A record, lockout, request and pin encode with snake_case names and leave out what has no
// value: no Go zero time, no empty string.
func TestStoredJSONIsSnakeCaseWithoutZeroValues(t *testing.T) {
	for _, v := range []any{
		Record{Seq: 1, Time: time.Now(), Type: RecordOperator, Action: "reload"},
		Lockout{Server: "arm", At: time.Now()},
		Approval{ID: "apr-1", Digest: "d", Server: "arm", Tool: "arm__move", State: ApprovalPending, Created: time.Now()},
		Pin{Server: "arm", Tool: "move", Digest: "d"},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for k, val := range m {
			if k != strings.ToLower(k) {
				t.Errorf("%T has the field %q: %s", v, k, b)
			}
			if val == "" && k != "hash" || val == "0001-01-01T00:00:00Z" {
				t.Errorf("%T has %q: %q: %s", v, k, val, b)
			}
		}
	}
}
