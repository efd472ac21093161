package storage

import (
	"errors"

	"golang.org/x/sys/unix"
)

// pageCached reports whether the byte at off of fd is in the page cache: a
// one-byte read that may not wait for the disk (RWF_NOWAIT) says so.
// Unknown (the kernel refuses the flag) counts as cached.
func pageCached(fd int, off int64) bool {
	var b [1]byte
	_, err := unix.Preadv2(fd, [][]byte{b[:]}, off, unix.RWF_NOWAIT)
	return !errors.Is(err, unix.EAGAIN)
}
