//go:build !linux

package storage

import "errors"

// reserve is not supported here: appends allocate as they go.
func (lf *lazyFile) reserve(off, n int64) error {
	return errors.ErrUnsupported
}
