package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
	"golang.org/x/sys/unix"
)

// directVFS is raft-wal's file system with segment files written through
// O_DIRECT: the raft log's bytes go from the process to the device without
// a copy into fresh page-cache pages.
//
// Why: every produced byte is written twice on each node, once into the
// raft log and once into its partition segment. The segment must live in
// the page cache (consumers read it with sendfile); the raft log is read
// back only by a lagging follower's catch-up or a restart, which raft's
// LogCache and the segment's own reads mostly spare. Measured on the 2-core
// VM appending 256 KiB frames each followed by fdatasync to a fallocated
// 64 MiB file: buffered 1.59-2.00 s wall and 0.75-1.00 s CPU per GB (plus
// the kernel's writeback work), O_DIRECT 1.23-1.36 s wall and 0.41-0.46 s
// CPU per GB. In a 3-node cluster run the page-cache copy
// (copy_folio_from_iter_atomic) was the largest single cost of each node.
//
// O_DIRECT needs block-aligned offsets, lengths and memory, while raft-wal
// appends frames at 8-byte alignment. Each write is therefore widened to
// whole blocks: the bytes already written in the first block (kept in
// memory from the previous write, or read back after a reopen) are
// rewritten with the new bytes, and the last block is padded with zeros,
// which is what the fallocated file holds there anyway and what raft-wal's
// reader takes as the end of the frames. Rewriting a block with the same
// prefix cannot tear committed bytes: a sector holds either its old or its
// new content and both carry the same committed prefix. Sync still fsyncs:
// the device's cache and the extents' written state need it.
//
// Reads go through a second, buffered descriptor; the kernel invalidates
// cached pages a direct write overlaps, so they see what was written.
//
// A file system that refuses O_DIRECT (tmpfs) gets raft-wal's buffered
// files.
type directVFS struct {
	types.VFS // ListDir, Delete, OpenReader: raft-wal's own
}

// directBlock is the alignment used for offsets, lengths and memory: the
// largest logical block size in use (512 on this VM's disk, 4096 on most).
const directBlock = 4096

func newDirectVFS() directVFS { return directVFS{VFS: walfs.New()} }

// Create creates name in dir, preallocated to size, for direct writes.
func (v directVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR|syscall.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		return v.VFS.Create(dir, name, size)
	}
	if err != nil {
		return nil, err
	}
	if size > 0 {
		if err := preallocate(f, int64(size)); err != nil {
			_ = f.Close()
			_ = os.Remove(path)
			return nil, fmt.Errorf("preallocate %s: %w", path, err)
		}
	}
	return newDirectFile(f, path, dir, true)
}

// OpenWriter opens an existing segment (the tail, after a restart) for
// direct writes.
func (v directVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		return v.VFS.OpenWriter(dir, name)
	}
	if err != nil {
		return nil, err
	}
	return newDirectFile(f, path, dir, false)
}

// preallocate reserves size bytes for f, as raft-wal does: the file's
// length becomes size and its blocks are allocated, so appends do not
// extend it. A file system without fallocate gets a plain truncate.
func preallocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
		return f.Truncate(size)
	}
	return err
}

// directFile is one raft-wal segment file written with O_DIRECT.
//
// Ownership: raft-wal calls WriteAt and Sync from one writer at a time
// (under its write lock), so tailOff and tail belong to that caller; ReadAt
// runs from any goroutine and touches only reader.
type directFile struct {
	direct *os.File // O_DIRECT, for writes
	reader *os.File // buffered, for reads
	dir    string
	synced atomic.Bool // the directory was fsynced after creation

	// tailOff is the block-aligned file offset where tail starts; tail
	// holds the bytes written in the block at tailOff (fewer than
	// directBlock), so the next append can rewrite that block whole.
	// tailOff < 0: unknown, read back before the next write.
	tailOff int64
	tail    []byte
}

// directBufs holds block-aligned scratch buffers for writes, shared by
// every segment file: raft-wal keeps sealed segments open for reads, so a
// buffer per file (each the size of its largest append) would live as long
// as the segment. logCache.StoreLogs bounds an append to maxStoreBytes.
var directBufs sync.Pool // of *[]byte

func getDirectBuf(n int) *[]byte {
	if b, ok := directBufs.Get().(*[]byte); ok && cap(*b) >= n {
		return b
	}
	b := alignedBuf(max(n+n/4, 64<<10))
	return &b
}

func newDirectFile(f *os.File, path, dir string, created bool) (*directFile, error) {
	r, err := os.Open(path)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	d := &directFile{direct: f, reader: r, dir: dir, tailOff: -1}
	if created {
		d.tailOff = 0
	} else {
		d.synced.Store(true) // an existing file's directory entry was synced when it was created
	}
	return d, nil
}

// alignedBuf returns n bytes whose start is directBlock-aligned.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directBlock)
	skip := (directBlock - int(uintptr(unsafe.Pointer(&b[0]))%directBlock)) % directBlock
	return b[skip : skip+n : skip+n]
}

// WriteAt writes p at off by rewriting the whole blocks it touches.
func (d *directFile) WriteAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	start := off &^ (directBlock - 1)
	if d.tailOff != start || int64(len(d.tail)) != off-start {
		// Not a continuation of the last write (the first write after a
		// reopen): read the block's bytes before off from the file.
		prefix, err := d.readPrefix(start, int(off-start))
		if err != nil {
			return 0, err
		}
		d.tail = append(d.tail[:0], prefix...)
	}
	end := off + int64(len(p))
	span := int((end - start + directBlock - 1) &^ (directBlock - 1))
	pooled := getDirectBuf(span)
	defer directBufs.Put(pooled)
	b := (*pooled)[:span]
	n := copy(b, d.tail)
	n += copy(b[n:], p)
	clear(b[n:])
	if err := writeFullAt(d.direct, b, start); err != nil {
		d.tailOff = -1
		return 0, err
	}
	// Keep the bytes of the last, partly written block for the next append.
	lastBlock := (end &^ (directBlock - 1))
	d.tailOff = lastBlock
	d.tail = append(d.tail[:0], b[lastBlock-start:end-start]...)
	return len(p), nil
}

// readPrefix reads n bytes (n < directBlock) at the aligned offset start
// through the buffered descriptor.
func (d *directFile) readPrefix(start int64, n int) ([]byte, error) {
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	if _, err := d.reader.ReadAt(b, start); err != nil {
		return nil, fmt.Errorf("read back the partial block at %d of %s: %w", start, d.reader.Name(), err)
	}
	return b, nil
}

func writeFullAt(f *os.File, b []byte, off int64) error {
	for len(b) > 0 {
		n, err := f.WriteAt(b, off)
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

func (d *directFile) ReadAt(p []byte, off int64) (int, error) { return d.reader.ReadAt(p, off) }

// Sync fsyncs the file, and its directory the first time after creation
// (as raft-wal's own files do, so a crash cannot forget a new segment).
func (d *directFile) Sync() error {
	if err := d.direct.Sync(); err != nil {
		return err
	}
	if d.synced.Load() {
		return nil
	}
	if err := syncDir(d.dir); err != nil {
		return err
	}
	d.synced.Store(true)
	return nil
}

func (d *directFile) Close() error {
	return errors.Join(d.direct.Close(), d.reader.Close())
}
