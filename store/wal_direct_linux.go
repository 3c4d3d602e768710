package store

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// directBlock is the unit of a direct write to the write-ahead file: offsets, lengths and the
// buffer's address are multiples of it, which covers the logical block size of every disk
// Linux drives (512 or 4096 bytes).
const directBlock = 4096

// directKeep bounds the scratch buffer kept between writes; a larger batch (records of
// megabyte arguments) gets a buffer of its own, as the batch's frames do.
const directKeep = 1 << 20

// directWAL writes frames to the write-ahead file with O_DIRECT|O_DSYNC: one pwrite that
// returns when the frames are on the disk, instead of a pwrite into the page cache and an
// fdatasync. The data is the same and so is the promise (O_DSYNC is fdatasync's guarantee for
// the bytes written); on this project's measurements it costs about 30% less CPU and 20 µs less
// per sync. Writes cover whole blocks, so the bytes of the block before the frames (earlier
// frames of the same run) are kept in tail and written again with them.
type directWAL struct {
	f *os.File
	// buf is block-aligned scratch for the blocks of one write.
	buf []byte
	// tail holds the contents of the block at tailOff as last written; tailOff < 0 when no
	// block is held.
	tail    []byte
	tailOff int64
}

// openDirect opens path for direct synchronous writes; nil when the filesystem does not take
// them (the caller then writes through the page cache and syncs).
func openDirect(path string) *directWAL {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT|syscall.O_DSYNC, 0)
	if err != nil {
		return nil
	}
	return &directWAL{f: f, tail: alignedBlocks(1), tailOff: -1}
}

// alignedBlocks returns n blocks of zeros at a block-aligned address.
func alignedBlocks(n int) []byte {
	b := make([]byte, n*directBlock+directBlock)
	skip := (directBlock - int(uintptr(unsafe.Pointer(&b[0]))%directBlock)) % directBlock
	return b[skip : skip+n*directBlock : skip+n*directBlock]
}

// write puts frames at off, on the disk when it returns. The file beyond what frames cover in
// their last block is written as zeros: what was there is a frame of a run the file no longer
// holds (the file was reused) or zeros, and either ends the run on replay.
func (d *directWAL) write(frames []byte, off int64, read func(b []byte, off int64) error) error {
	start := off &^ (directBlock - 1)
	end := (off + int64(len(frames)) + directBlock - 1) &^ (directBlock - 1)
	n := int(end - start)
	buf := d.buf
	if cap(buf) < n {
		buf = alignedBlocks(n / directBlock)
		if n <= directKeep {
			d.buf = buf
		}
	}
	buf = buf[:n]
	if head := int(off - start); head > 0 {
		if d.tailOff == start {
			copy(buf, d.tail[:head])
		} else if err := read(buf[:directBlock], start); err != nil {
			return err
		}
	}
	copy(buf[off-start:], frames)
	clear(buf[int(off-start)+len(frames):])
	// os.File.WriteAt retries interrupted and short writes itself.
	if _, err := d.f.WriteAt(buf, start); err != nil {
		if directRefused(err) {
			return errDirectRefused
		}
		d.tailOff = -1
		return err
	}
	copy(d.tail, buf[n-directBlock:])
	d.tailOff = end - directBlock
	return nil
}

// directRefused reports whether err is a filesystem refusing a direct write as such (its
// alignment, or O_DIRECT itself), not a failure to write: EINVAL, EOPNOTSUPP (ENOTSUP).
func directRefused(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP)
}

// forget drops the held block: the file was written another way.
func (d *directWAL) forget() { d.tailOff = -1 }

func (d *directWAL) close() {
	if d != nil {
		d.f.Close()
	}
}
