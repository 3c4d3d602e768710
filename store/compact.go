package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// compactTxBytes bounds one transaction of the copy, so a large file is copied in bounded memory.
const compactTxBytes = 64 << 20

// CompactResult is what [Compact] did.
type CompactResult struct {
	// Path is the state file.
	Path string `json:"path"`
	// Before and After are its sizes on disk in bytes.
	Before int64 `json:"before_bytes"`
	After  int64 `json:"after_bytes"`
}

// Compact rewrites dir/state.db into a fresh file holding every bucket (meta, lockouts, audit,
// approvals, pins, the in-flight journal) without the free pages bbolt keeps after pruning,
// fsyncs it and renames it over the old file. It holds the state file's exclusive lock
// throughout, so it fails with a [*LockedError] while a gateway (or any command) has the file
// open. Pruning frees pages for reuse but never gives them back to the file system; compacting
// is how the file shrinks.
func Compact(dir string) (CompactResult, error) {
	path := filepath.Join(dir, FileName)
	res := CompactResult{Path: path}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("no state file at %s: nothing to compact", path)
	}
	if err != nil {
		return res, err
	}
	res.Before = info.Size()

	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return res, lockedError(path)
	}
	if err != nil {
		return res, fmt.Errorf("open state file %s: %w", path, err)
	}
	defer src.Close()
	if err := writeOwner(path, time.Now()); err == nil {
		defer os.Remove(ownerPath(path))
	}
	if err := checkLayout(src, path); err != nil {
		return res, err
	}

	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("remove the leftover %s: %w", tmp, err)
	}
	if err := copyCompact(src, tmp); err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("compact %s into %s: %w; the state file is unchanged", path, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("replace %s with its compacted copy: %w; the state file is unchanged", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		// The rename is durable once the directory is synced.
		_ = d.Sync()
		d.Close()
	}
	if info, err := os.Stat(path); err == nil {
		res.After = info.Size()
	}
	return res, nil
}

// checkLayout refuses a file from a newer layout: copying what this version does not understand
// is not safe.
func checkLayout(db *bolt.DB, path string) error {
	return db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		if v := meta.Get(keySchema); v != nil {
			if n, err := strconv.Atoi(string(v)); err != nil || n > schemaVersion {
				return fmt.Errorf("state file %s has layout version %q, which this mcp-gateway does not understand (%d); use a newer mcp-gateway", path, v, schemaVersion)
			}
		}
		return nil
	})
}

// copyCompact copies src into a new file at tmp, checks that every bucket has as many keys as
// in src, and fsyncs it.
func copyCompact(src *bolt.DB, tmp string) error {
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return err
	}
	if err := bolt.Compact(dst, src, compactTxBytes); err != nil {
		dst.Close()
		return err
	}
	want, err := keyCounts(src)
	if err == nil {
		var got map[string]int
		if got, err = keyCounts(dst); err == nil {
			for name, n := range want {
				if got[name] != n {
					err = fmt.Errorf("bucket %s has %d keys in the copy, %d in the original", name, got[name], n)
					break
				}
			}
		}
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// keyCounts counts the keys of every top-level bucket and of the buckets nested in it.
func keyCounts(db *bolt.DB) (map[string]int, error) {
	out := map[string]int{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			out[string(name)] = b.Stats().KeyN
			return nil
		})
	})
	return out, err
}
