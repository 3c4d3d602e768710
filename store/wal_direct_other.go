//go:build !linux

package store

// directWAL is not used where O_DIRECT is not Linux's: frames go through the page cache and
// are synced.
type directWAL struct{}

func openDirect(string) *directWAL { return nil }

func (*directWAL) write([]byte, int64, func([]byte, int64) error) error { return errDirectRefused }
func (*directWAL) forget()                                              {}
func (*directWAL) close()                                               {}
