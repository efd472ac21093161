//go:build !linux

package storage

import "errors"

// dropCache does nothing where the kernel offers no such advice.
func (lf *lazyFile) dropCache(from, to, writeTo int64) {}

// startWriteback does nothing where the kernel offers no such call.
func (lf *lazyFile) startWriteback(from, to int64) {}

// CachedBytes is not known here.
func CachedBytes(path string) (cached, size int64, err error) {
	return 0, 0, errors.New("page cache residency is only known on Linux")
}
