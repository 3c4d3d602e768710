package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateString(t *testing.T) {
	long := strings.Repeat("é", 1500) // 3000 bytes, two per rune
	sum := sha256.Sum256([]byte(long))
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"short is kept", "motor stalled", 2048, "motor stalled"},
		{"exactly max is kept", strings.Repeat("a", 8), 8, strings.Repeat("a", 8)},
		{"cut at a rune boundary", long, 2047, strings.Repeat("é", 1023) + fmt.Sprintf("…[truncated: 3000 bytes, sha256:%s]", hex.EncodeToString(sum[:]))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TruncateString(tc.in, tc.max)
			if got != tc.want {
				t.Errorf("TruncateString = %.80q… (%d bytes), want %.80q… (%d bytes)", got, len(got), tc.want, len(tc.want))
			}
			if !utf8.ValidString(got) {
				t.Error("the cut string is not valid UTF-8")
			}
		})
	}
}

func TestSealBoundsReasonAndDetail(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	huge := strings.Repeat("upstream error: connection reset by peer; ", 25000) // ~1 MB
	rec := callRecord("arm", "move", 1)
	rec.Reason = huge
	rec.RunID = huge
	rec.Detail = map[string]any{"upstream": map[string]any{"message": huge}, "labels": []string{"untrusted"}}
	got, err := s.Audit().AppendSync(t.Context(), rec)
	if err != nil {
		t.Fatal(err)
	}
	stored, ok := s.AuditLast()
	if !ok || stored.Hash != got.Hash {
		t.Fatalf("last record %+v, want the one appended", stored)
	}
	sum := sha256.Sum256([]byte(huge))
	marker := fmt.Sprintf("[truncated: %d bytes, sha256:%s]", len(huge), hex.EncodeToString(sum[:]))
	if len(stored.Reason) > MaxTextBytes+200 || !strings.HasSuffix(stored.Reason, marker) || !strings.HasPrefix(stored.Reason, "upstream error:") {
		t.Errorf("reason stored with %d bytes, ending %q; want at most %d bytes and the marker %q",
			len(stored.Reason), stored.Reason[max(0, len(stored.Reason)-120):], MaxTextBytes, marker)
	}
	if len(stored.RunID) > MaxTextBytes+200 {
		t.Errorf("run id stored with %d bytes", len(stored.RunID))
	}
	msg, _ := stored.Detail["upstream"].(map[string]any)["message"].(string)
	if !strings.HasSuffix(msg, marker) || len(msg) > MaxTextBytes+200 {
		t.Errorf("detail message stored with %d bytes: %.100q", len(msg), msg)
	}
	if labels, _ := stored.Detail["labels"].([]any); len(labels) != 1 || labels[0] != "untrusted" {
		t.Errorf("short detail values must be kept: %v", stored.Detail["labels"])
	}
	enc, _ := json.Marshal(stored)
	if len(enc) > 4*MaxTextBytes+2000 {
		t.Errorf("a record with 1 MB texts is stored in %d bytes", len(enc))
	}
	if n, bad := s.AuditVerify(); bad != nil || n != 1 {
		t.Errorf("AuditVerify = %d, %v", n, bad)
	}

	// Many short strings: the Detail as a whole is bounded.
	many := map[string]any{}
	for i := range 5000 {
		many[fmt.Sprintf("k%d", i)] = "some value"
	}
	rec = callRecord("arm", "move", 2)
	rec.Detail = many
	if _, err := s.Audit().AppendSync(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	stored, _ = s.AuditLast()
	if cut, _ := stored.Detail["truncated"].(string); len(stored.Detail) != 1 || !strings.Contains(cut, "…[truncated: ") {
		t.Errorf("a 5000-key detail is stored as %d keys", len(stored.Detail))
	}
}
