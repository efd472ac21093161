package storage

import (
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
)

// File handles are the scarce resource of a broker with many partitions:
// every segment has three files, and one descriptor per file would cap the
// partition count at a fraction of RLIMIT_NOFILE (100,000 partitions need
// 300,000 descriptors). Segment files are therefore opened lazily, through
// a FileCache: a bounded LRU of open descriptors shared by every Log.
//
// A descriptor is closed by eviction only while no call is using it, so
// eviction is safe with concurrent preads; the next use reopens the file by
// name. Two cases cannot reopen by name and pin their descriptors instead
// (see lazyFile.pin): a segment being deleted (its name is unlinked while
// readers may still hold a reference) and a segment being replaced by
// compaction (its name is renamed over by the new file).

// DefaultMaxOpenFiles bounds the descriptors of the default FileCache when
// SetMaxOpenFiles was not called: 1024, or a quarter of the process's
// RLIMIT_NOFILE if that is lower (the rest is for sockets and other files),
// and never fewer than minOpenFiles.
const DefaultMaxOpenFiles = 1024

// minOpenFiles is the smallest useful cache: a segment's three files plus
// a few segments being read or compacted at once.
const minOpenFiles = 16

// FileCache bounds the number of segment file descriptors open at once
// across every Log that uses it. The bound is soft: descriptors in use by a
// call in flight or pinned by a retiring segment are never closed, so the
// count can exceed the bound by what is in use at that instant.
type FileCache struct {
	max int
	// dropBehind: appends let their pages go once written back
	// (dropbehind.go).
	dropBehind atomic.Bool
	// writeBehind: appends start their pages' writeback as they go
	// (SetWriteBehind).
	writeBehind atomic.Bool

	mu struct {
		sync.Mutex
		lru  list.List // of *lazyFile with an open descriptor; front = most recent
		open int       // descriptors open, lru.Len() (kept for cheap reads)
	}
}

// NewFileCache returns a cache keeping at most max descriptors open
// (minOpenFiles if max is smaller).
func NewFileCache(max int) *FileCache {
	return &FileCache{max: clampOpenFiles(max)}
}

func clampOpenFiles(n int) int { return max(n, minOpenFiles) }

var defaultCache struct {
	mu sync.Mutex
	c  *FileCache
}

// SetMaxOpenFiles sets the bound of the default FileCache, the one Logs use
// when Options.Files is nil. Call it before opening any Log (at startup);
// Logs already open keep the cache they were opened with.
func SetMaxOpenFiles(n int) {
	defaultCache.mu.Lock()
	defer defaultCache.mu.Unlock()
	defaultCache.c = NewFileCache(n)
}

// DefaultFileCache returns the cache Logs use when Options.Files is nil.
func DefaultFileCache() *FileCache {
	defaultCache.mu.Lock()
	defer defaultCache.mu.Unlock()
	if defaultCache.c == nil {
		n := DefaultMaxOpenFiles
		if lim, ok := fileLimit(); ok && lim/4 < uint64(n) {
			n = int(lim / 4)
		}
		defaultCache.c = NewFileCache(n)
	}
	return defaultCache.c
}

// Max is the cache's bound.
func (c *FileCache) Max() int { return c.max }

// Open is the number of descriptors the cache holds open now.
func (c *FileCache) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.open
}

// lazyFile is one segment file opened on demand through a FileCache.
// Its methods mirror the *os.File ones the log uses and may be called from
// any goroutine. Once closed (the segment's last reference released) every
// method fails with os.ErrClosed.
type lazyFile struct {
	c *FileCache

	// Guarded by c.mu.
	path   string // changed by renamed once compaction output is swapped in
	f      *os.File
	users  int           // calls in flight using f; f is not evicted while > 0
	pinned bool          // f is kept open until close (see pin)
	closed bool          // close ran; f is nil for good
	elem   *list.Element // position in c.mu.lru while f != nil
}

// openLazy creates (create: O_CREATE, and O_TRUNC if trunc) or checks the
// file at path and returns it with its descriptor in the cache. Opening at
// once means a missing file or a full disk shows here, not at first use.
func (c *FileCache) openLazy(path string, create, trunc bool) (*lazyFile, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	if trunc {
		flag |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	lf := &lazyFile{c: c, path: path}
	c.mu.Lock()
	lf.install(f)
	evicted := c.evictLocked()
	c.mu.Unlock()
	closeAll(evicted)
	return lf, nil
}

// install makes f the file's descriptor (c.mu held).
func (lf *lazyFile) install(f *os.File) {
	lf.f = f
	lf.elem = lf.c.mu.lru.PushFront(lf)
	lf.c.mu.open++
}

// evictLocked unlinks the least recently used idle descriptors while the
// cache is over its bound and returns them for closing outside c.mu.
func (c *FileCache) evictLocked() []*os.File {
	var out []*os.File
	for e := c.mu.lru.Back(); e != nil && c.mu.open > c.max; {
		prev := e.Prev()
		lf := e.Value.(*lazyFile)
		if lf.users == 0 && !lf.pinned {
			out = append(out, lf.dropLocked())
		}
		e = prev
	}
	return out
}

// dropLocked takes f out of the cache (c.mu held) and returns it.
func (lf *lazyFile) dropLocked() *os.File {
	f := lf.f
	lf.c.mu.lru.Remove(lf.elem)
	lf.c.mu.open--
	lf.f, lf.elem = nil, nil
	return f
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		// Close errors on a descriptor reopened by name later carry no
		// data-loss signal: writes reached the page cache at pwrite, and
		// fsync on any descriptor of the inode reports writeback errors.
		_ = f.Close()
	}
}

// get returns the open descriptor, reopening it if it was evicted, and
// counts the caller as a user until put.
func (lf *lazyFile) get() (*os.File, error) {
	c := lf.c
	for {
		c.mu.Lock()
		if f, ok, err := lf.useLocked(); ok || err != nil {
			c.mu.Unlock()
			return f, err
		}
		path := lf.path
		c.mu.Unlock()
		if testHookReopen != nil {
			testHookReopen(lf)
		}
		// Open outside the lock: a slow open must not stall every other
		// file. Never O_CREATE here: a file that vanished must not come
		// back empty.
		nf, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			// The owner may have pinned the file (opening it) and then
			// unlinked it between our look and our open: a reader on a
			// retiring segment must get the pinned descriptor, not ENOENT.
			c.mu.Lock()
			moved := lf.f != nil || lf.closed || lf.path != path
			c.mu.Unlock()
			if moved {
				continue
			}
			return nil, fmt.Errorf("reopening %s: %w", path, err)
		}
		c.mu.Lock()
		if lf.path != path {
			c.mu.Unlock() // renamed meanwhile: open the new name
			_ = nf.Close()
			continue
		}
		if f, ok, err := lf.useLocked(); ok || err != nil {
			// Closed, or another caller reopened it meanwhile.
			c.mu.Unlock()
			_ = nf.Close()
			return f, err
		}
		lf.install(nf)
		lf.users++
		evicted := c.evictLocked()
		c.mu.Unlock()
		closeAll(evicted)
		return nf, nil
	}
}

// testHookReopen, when set (tests only), runs in get between reading the
// path of an evicted descriptor and reopening it.
var testHookReopen func(*lazyFile)

// useLocked counts a user of the open descriptor (ok), or fails once the
// file is closed; neither when the descriptor must be reopened (c.mu held).
func (lf *lazyFile) useLocked() (*os.File, bool, error) {
	if lf.closed {
		return nil, false, fmt.Errorf("%s: %w", lf.path, os.ErrClosed)
	}
	if lf.f == nil {
		return nil, false, nil
	}
	lf.users++
	lf.c.mu.lru.MoveToFront(lf.elem)
	return lf.f, true, nil
}

// put ends a use begun by get.
func (lf *lazyFile) put() {
	c := lf.c
	c.mu.Lock()
	lf.users--
	var evicted []*os.File
	if c.mu.open > c.max {
		evicted = c.evictLocked()
	}
	c.mu.Unlock()
	closeAll(evicted)
}

// pin opens the descriptor and keeps it open until close, so that readers
// holding the segment keep reading the same inode after its name is
// unlinked or renamed over. Call it before removing or replacing the file.
func (lf *lazyFile) pin() error {
	if _, err := lf.get(); err != nil {
		return err
	}
	lf.c.mu.Lock()
	lf.pinned = true
	lf.users--
	lf.c.mu.Unlock()
	return nil
}

// close releases the descriptor for good (the segment's last reference is
// gone, so nothing uses it).
func (lf *lazyFile) close() error {
	c := lf.c
	c.mu.Lock()
	if lf.closed {
		c.mu.Unlock()
		return nil
	}
	lf.closed = true
	var f *os.File
	if lf.f != nil {
		f = lf.dropLocked()
	}
	c.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close()
}

// Name is the file's path.
func (lf *lazyFile) Name() string {
	lf.c.mu.Lock()
	defer lf.c.mu.Unlock()
	return lf.path
}

// renamed records that the file now lives at path (the caller renamed it).
// Its open descriptor, if any, is still the same file.
func (lf *lazyFile) renamed(path string) {
	lf.c.mu.Lock()
	lf.path = path
	lf.c.mu.Unlock()
}

// ReadAt implements io.ReaderAt.
func (lf *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := lf.get()
	if err != nil {
		return 0, err
	}
	defer lf.put()
	return f.ReadAt(p, off)
}

// WriteAt implements io.WriterAt.
func (lf *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := lf.get()
	if err != nil {
		return 0, err
	}
	defer lf.put()
	return f.WriteAt(p, off)
}

// Truncate changes the file's size.
func (lf *lazyFile) Truncate(size int64) error {
	f, err := lf.get()
	if err != nil {
		return err
	}
	defer lf.put()
	return f.Truncate(size)
}

// Sync fsyncs the file. A descriptor reopened after eviction flushes the
// inode's dirty pages all the same: fsync is per inode, not per descriptor.
func (lf *lazyFile) Sync() error {
	f, err := lf.get()
	if err != nil {
		return err
	}
	defer lf.put()
	return f.Sync()
}

// Stat returns the file's metadata.
func (lf *lazyFile) Stat() (fs.FileInfo, error) {
	f, err := lf.get()
	if err != nil {
		return nil, err
	}
	defer lf.put()
	return f.Stat()
}

// pinFiles pins every file of a segment that is about to be unlinked or
// renamed over. A failure (out of descriptors) is logged, not returned: the
// removal goes ahead, and a reader still on the segment gets a read error
// it can retry, rather than the log keeping deleted data.
func pinFiles(logger *slog.Logger, s *segment) {
	var errs []error
	for _, lf := range s.files() {
		if err := lf.pin(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		logger.Warn("could not keep a retiring segment open for readers", "segment", s.base, "err", err)
	}
}
