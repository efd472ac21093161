package storage

import "golang.org/x/sys/unix"

// reserve allocates the file's blocks in [off, off+n) without changing
// its size.
func (lf *lazyFile) reserve(off, n int64) error {
	f, err := lf.get()
	if err != nil {
		return err
	}
	defer lf.put()
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
}
