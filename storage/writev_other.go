//go:build !linux

package storage

// writevAt writes bufs contiguously at off: gathered into one buffer and
// written with one pwrite(2), where pwritev is not wired up.
func (lf *lazyFile) writevAt(bufs [][]byte, off int64) error {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	all := make([]byte, 0, n)
	for _, b := range bufs {
		all = append(all, b...)
	}
	_, err := lf.WriteAt(all, off)
	return err
}
