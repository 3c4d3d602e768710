package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"

	bolt "go.etcd.io/bbolt"
)

// keyDigest is the meta key of the secret the argument digests are keyed with.
var keyDigest = []byte("args_digest_key")

// An audit record keeps a digest of the original arguments beside the redacted ones, so that an
// operator holding the arguments can show they are the ones recorded. A plain SHA-256 would let
// anyone with the record try every value of a redacted field (a 4-digit PIN, a phone number) and
// recover it; so the digest is an HMAC-SHA256 under a random key kept in the state file, which
// an audit export does not carry.

// loadDigestKey reads the digest key, creating it on a writable store that has none.
func (s *Store) loadDigestKey() error {
	err := s.db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			s.digestKey = append([]byte(nil), meta.Get(keyDigest)...)
		}
		return nil
	})
	if err != nil || len(s.digestKey) > 0 || s.readOnly {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("make the audit's digest key: %w", err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyDigest, key) }); err != nil {
		return fmt.Errorf("store the audit's digest key in %s: %w", s.path, err)
	}
	s.digestKey = key
	return nil
}

// DigestArgs is the digest an audit record keeps of a call's original arguments: the hex
// HMAC-SHA256 of their bytes under the state file's own key. `mcp-gateway audit digest`
// computes it for an operator; without the state file it cannot be computed or inverted.
func (s *Store) DigestArgs(args []byte) string {
	// An HMAC keeps its key's padded blocks; one taken from the pool starts from them again
	// (Reset) instead of hashing the key anew.
	m, _ := s.digests.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, s.digestKey)
	} else {
		m.Reset()
	}
	m.Write(args)
	var sum [sha256.Size]byte
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], m.Sum(sum[:0]))
	s.digests.Put(m)
	return string(text[:])
}
