//go:build linux || darwin || freebsd

package storage

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// freeBytes is the space unprivileged writers may still use on the file
// system holding path's directory, -1 if unknown.
func freeBytes(path string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
