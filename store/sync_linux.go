package store

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data and only the metadata needed to read it back: for blocks the file
// already has, no journal commit.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
