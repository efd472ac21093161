package storage

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dropCache drops [from, to) from the page cache, waiting for what of it
// is still being written back (started a pass earlier, so usually done:
// a wait here means appends outrun the disk, and it paces them), then
// starts writeback of [to, writeTo). Advisory: errors are ignored.
func (lf *lazyFile) dropCache(from, to, writeTo int64) {
	f, err := lf.get()
	if err != nil {
		return
	}
	defer lf.put()
	fd := int(f.Fd())
	if to > from {
		_ = unix.SyncFileRange(fd, from, to-from, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		_ = unix.Fadvise(fd, from, to-from, unix.FADV_DONTNEED)
	}
	if writeTo > to {
		_ = unix.SyncFileRange(fd, to, writeTo-to, unix.SYNC_FILE_RANGE_WRITE)
	}
}

// startWriteback starts writeback of [from, to) without waiting for it.
// Advisory: errors are ignored.
func (lf *lazyFile) startWriteback(from, to int64) {
	f, err := lf.get()
	if err != nil {
		return
	}
	defer lf.put()
	_ = unix.SyncFileRange(int(f.Fd()), from, to-from, unix.SYNC_FILE_RANGE_WRITE)
}

// CachedBytes is how many bytes of the file at path are in the page cache
// (whole pages, by mincore(2) of a mapping, which reads nothing in), and
// its size. For tests and diagnostics.
func CachedBytes(path string) (cached, size int64, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	cached, err = cachedRange(path, 0, st.Size())
	return min(cached, st.Size()), st.Size(), err
}

// cachedRange is how many bytes of the file's pages covering [from, to)
// are in the page cache; from is a multiple of the page size.
func cachedRange(path string, from, to int64) (int64, error) {
	if to <= from {
		return 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), from, int(to-from), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("map %s: %w", path, err)
	}
	defer unix.Munmap(mem)
	page := os.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, fmt.Errorf("mincore %s: %w", path, errno)
	}
	var cached int64
	for _, v := range vec {
		cached += int64(v&1) * int64(page)
	}
	return cached, nil
}
