//go:build !(linux || darwin || freebsd)

package storage

// freeBytes is unknown here: the reserve is simply tried.
func freeBytes(string) int64 { return -1 }
