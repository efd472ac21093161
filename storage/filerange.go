package storage

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// File ranges let a fetch send stored batches from the segment file
// (sendfile) instead of reading them into memory first. A FileRange holds
// a reference to its segment and keeps the segment file's descriptor out
// of FileCache eviction until Release, so the bytes stay readable even if
// retention or compaction unlinks or replaces the file meanwhile (the
// segment pins its descriptors before it removes them). The bound on open
// descriptors is soft by what pending ranges use: one descriptor per
// segment, shared by every range of it.
//
// Segment files are append-only below their committed size, except for
// Truncate; a range whose file was truncated under it reads short, which
// ReadAt reports as io.ErrUnexpectedEOF (the sender must then drop the
// connection: the response's length prefix already promised the bytes).

// BatchSpan is one batch of a FileRange: its offsets and where it ends,
// in bytes from the range's start.
type BatchSpan struct {
	BaseOffset, LastOffset int64
	End                    int64
}

// FileRange is a run of whole stored batches of one segment file, read
// from a single goroutine at a time; Release may be called from any
// goroutine, more than once.
type FileRange struct {
	seg  *segment
	f    *os.File
	fd   int   // f's descriptor, stable while the range is held
	pos  int64 // first byte of the range in the file
	size int64
	// spans are the range's batches in order; spans[len-1].End == size.
	spans    []BatchSpan
	released atomic.Bool
}

// Fd is the segment file's descriptor, valid until Release.
func (r *FileRange) Fd() int { return r.fd }

// Offset is the range's first byte in the file.
func (r *FileRange) Offset() int64 { return r.pos }

// Len is the range's size in bytes.
func (r *FileRange) Len() int { return int(r.size) }

// Batches are the range's batches, in order.
func (r *FileRange) Batches() []BatchSpan { return r.spans }

// CutBefore drops the batches that start at or past limit and returns the
// offset after the last batch kept (-1 when none is left; the range is
// then empty and should be released).
func (r *FileRange) CutBefore(limit int64) int64 {
	n := 0
	for n < len(r.spans) && r.spans[n].BaseOffset < limit {
		n++
	}
	r.spans = r.spans[:n]
	if n == 0 {
		r.size = 0
		return -1
	}
	r.size = r.spans[n-1].End
	return r.spans[n-1].LastOffset + 1
}

// ReadAt reads len(p) bytes at off within the range (a pread of the
// file). A short file (truncated under the range) is io.ErrUnexpectedEOF.
func (r *FileRange) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > r.size {
		return 0, fmt.Errorf("read [%d, %d) outside a file range of %d bytes", off, off+int64(len(p)), r.size)
	}
	n, err := r.f.ReadAt(p, r.pos+off)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Cached reports whether the range's first and last bytes are in the
// page cache (a read that would not wait for the disk). A range sent with
// sendfile is read on the network event loop, which must not wait for the
// disk: a range not cached is read into memory by the caller instead,
// which also starts readahead. Batches are written in order, so a range
// cached at both ends is cached whole unless memory pressure evicted its
// middle. Unknown (no RWF_NOWAIT) counts as cached.
func (r *FileRange) Cached() bool {
	probes, n := cacheProbes(r.pos, r.size)
	for _, off := range probes[:n] {
		if !pageCached(r.fd, off) {
			return false
		}
	}
	return true
}

// cachePage is the granularity of the page cache that Cached probes: the
// smallest page size Linux uses, so two offsets within one such page are
// always in one page, whatever the system's page size.
const cachePage = 4096

// cacheProbes returns the file offsets Cached reads for a range of size
// bytes at pos, and how many there are (an array, not a slice: Cached is
// on every fetch's path and must not allocate): its first and last bytes,
// or only the first when both lie
// in one page. Why: a tailing consumer's fetch (one small batch, as in
// EndToEndLatency) mostly fits in a page, and the second probe was a
// syscall for nothing (Cached, both probes, took 3% of the broker's CPU
// in that test; issue 13).
func cacheProbes(pos, size int64) ([2]int64, int) {
	last := pos + size - 1
	if size <= 1 || pos/cachePage == last/cachePage {
		return [2]int64{pos}, 1
	}
	return [2]int64{pos, last}, 2
}

// AppendTo appends the range's bytes to dst (the copying path: TLS
// connections, tests).
func (r *FileRange) AppendTo(dst []byte) ([]byte, error) {
	n := len(dst)
	dst = append(dst, make([]byte, r.size)...)
	if _, err := r.ReadAt(dst[n:], 0); err != nil {
		return dst[:n], err
	}
	return dst, nil
}

// Release gives back the descriptor and the segment reference. Safe to
// call more than once and from any goroutine; the range must not be used
// after.
func (r *FileRange) Release() {
	if r == nil || !r.released.CompareAndSwap(false, true) {
		return
	}
	r.seg.log.put()
	r.seg.release()
}

// ReadRange is Read without the copy: the same batches Read would return,
// as a range of the segment file (nil when Read would return nothing). The
// caller must Release it. Batch headers are read to find whole batches;
// bodies are not.
func (l *Log) ReadRange(offset int64, maxBytes int, strictMax bool) (*FileRange, error) {
	return readAt(l, offset, func(v segView, gen uint64, offset int64) (*FileRange, bool, error) {
		r, found, err := v.readRange(gen, offset, maxBytes, strictMax)
		if r == nil {
			v.s.release()
		}
		return r, found, err
	}, (*FileRange).Release)
}

// readRange builds the range for read's batches; the caller holds a
// segment reference, which a returned range takes over.
func (v segView) readRange(gen uint64, offset int64, maxBytes int, strictMax bool) (*FileRange, bool, error) {
	h, pos, found, err := v.locateHinted(gen, offset)
	if err != nil || !found {
		return nil, found, err
	}
	first := int64(h.TotalSize())
	if first > int64(maxBytes) && strictMax {
		return nil, true, nil
	}
	f, err := v.s.log.get()
	if err != nil {
		return nil, true, err
	}
	r := &FileRange{seg: v.s, f: f, pos: pos, size: first}
	r.spans = append(r.spans, BatchSpan{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), End: first})
	if err := r.setFd(); err != nil {
		v.s.log.put()
		return nil, true, err
	}
	if first < int64(maxBytes) {
		if err := r.extend(min(pos+int64(maxBytes), v.size)); err != nil {
			r.Release()
			return nil, true, err
		}
	}
	// The consumer's next fetch most likely asks for the offset after
	// this range, whose batch starts right after it (see readhint.go).
	last := r.spans[len(r.spans)-1]
	rememberNext(v.s, gen, last.LastOffset+1, r.pos+r.size)
	return r, true, nil
}

// setFd records f's descriptor. The descriptor stays open while the range
// holds its use of the file (see FileRange).
func (r *FileRange) setFd() error {
	rc, err := r.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("descriptor of %s: %w", r.f.Name(), err)
	}
	return rc.Control(func(fd uintptr) { r.fd = int(fd) })
}

// headerChunk is how much extend reads at once when batches are small;
// for batches larger than it, only each header is read, so the bodies of
// large batches are never copied.
const headerChunk = 4 << 10

// extend adds the whole batches that follow the range and end by limit
// (a file position). Bytes that do not parse as a batch end the range.
func (r *FileRange) extend(limit int64) error {
	var buf [headerChunk]byte
	var chunk []byte
	chunkAt := int64(-1)
	want := headerChunk
	for at := r.pos + r.size; at+recordbatch.HeaderSize <= limit; {
		if chunkAt < 0 || at+recordbatch.HeaderSize > chunkAt+int64(len(chunk)) {
			n := min(int64(want), limit-at)
			m, err := r.preadFull(buf[:n], at)
			if err != nil && !(err == io.EOF && m >= recordbatch.HeaderSize) {
				return fmt.Errorf("reading %s at %d: %w", r.f.Name(), at, err)
			}
			chunk, chunkAt = buf[:m], at
		}
		h, err := recordbatch.ParseHeader(chunk[at-chunkAt:])
		if err != nil {
			return nil // not a batch: the range ends before it
		}
		size := int64(h.TotalSize())
		if at+size > limit {
			return nil
		}
		// Small batches: many headers per read; large ones: read
		// just the next header.
		if size >= headerChunk/2 {
			want = recordbatch.HeaderSize
		} else {
			want = headerChunk
		}
		at += size
		r.size += size
		r.spans = append(r.spans, BatchSpan{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), End: r.size})
	}
	return nil
}

// preadFull is r.f.ReadAt on the range's descriptor without os.File's
// per-call bookkeeping (the descriptor is held open by the range). extend
// makes one such read per large batch, so the overhead counts (issue 13).
// Like ReadAt: a short read is io.EOF, EINTR is retried.
func (r *FileRange) preadFull(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Pread(r.fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}
