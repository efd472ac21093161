//go:build !linux

package storage

import (
	"errors"
	"os"
)

// allocate is not supported here: the reserve is written with zeros.
func allocate(*os.File, int64) error { return errors.ErrUnsupported }
