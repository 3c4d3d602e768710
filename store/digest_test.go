package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
)

// TestDigestArgsIsTheKeyedHMAC: whichever pooled HMAC computes it, and from however many
// goroutines, a digest is the HMAC-SHA256 of the arguments alone under the store's key.
func TestDigestArgsIsTheKeyedHMAC(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	want := func(args []byte) string {
		m := hmac.New(sha256.New, s.digestKey)
		m.Write(args)
		return hex.EncodeToString(m.Sum(nil))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				args := fmt.Appendf(nil, `{"g":%d,"i":%d}`, g, i%7)
				if got := s.DigestArgs(args); got != want(args) {
					t.Errorf("DigestArgs(%s) = %s, want %s", args, got, want(args))
					return
				}
			}
		})
	}
	wg.Wait()
}
