package storage

import (
	"io"
	"io/fs"

	"golang.org/x/sys/unix"
)

// maxIovecs is Linux's IOV_MAX: pwritev takes at most this many buffers.
const maxIovecs = 1024

// writevAt writes bufs contiguously at off with pwritev(2), looping over
// short writes, so that pieces held in different buffers (a patched batch
// header and the batch's records) need no copy into one. It consumes bufs:
// its elements are resliced past what was written (writeAll builds it for
// this one call).
func (lf *lazyFile) writevAt(bufs [][]byte, off int64) error {
	f, err := lf.get()
	if err != nil {
		return err
	}
	defer lf.put()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	rest := bufs
	for len(rest) > 0 {
		chunk := rest[:min(len(rest), maxIovecs)]
		var n int
		var werr error
		if cerr := rc.Write(func(fd uintptr) bool {
			for {
				n, werr = unix.Pwritev(int(fd), chunk, off)
				if werr != unix.EINTR {
					return true
				}
			}
		}); cerr != nil {
			return cerr
		}
		if werr != nil {
			return &fs.PathError{Op: "pwritev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return &fs.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		off += int64(n)
		for n > 0 {
			if n < len(rest[0]) {
				rest[0] = rest[0][n:]
				break
			}
			n -= len(rest[0])
			rest = rest[1:]
		}
		for len(rest) > 0 && len(rest[0]) == 0 {
			rest = rest[1:]
		}
	}
	return nil
}
