package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/regent-broker/regent/storage/recordbatch"
)

// errTorn reports bytes at a position that do not form a whole, sane batch.
var errTorn = errors.New("torn or corrupt batch")

// scanChunk is how much headerScanner reads at a time: enough for many small
// batch headers per pread, small enough that skipping large batches wastes
// little.
const scanChunk = 8 << 10

// headerScanner walks batch headers of a segment file in [pos, limit)
// without reading batch bodies beyond what one chunk covers.
type headerScanner struct {
	f          namedReaderAt
	pos, limit int64
	buf        []byte
	bufAt      int64
	pooled     *[]byte // buf's pool handle, nil when buf is not from scanBufs
}

// namedReaderAt is a segment file as the scanners see it.
type namedReaderAt interface {
	io.ReaderAt
	Name() string
}

func newHeaderScanner(f namedReaderAt, pos, limit int64) *headerScanner {
	return &headerScanner{f: f, pos: pos, limit: limit, bufAt: -1}
}

// scanBufs recycles scanners' chunk buffers: every fetch locates its first
// batch with a scanner, and the chunk was half the allocations of a
// tailing consumer's fetch (issue 13). Holds *[]byte of cap scanChunk.
var scanBufs = sync.Pool{New: func() any { b := make([]byte, scanChunk); return &b }}

// done gives the scanner's buffer back; the scanner and any header bytes
// it returned must not be used after. Optional: a scanner never done just
// leaves its buffer to the GC.
func (s *headerScanner) done() {
	if s.pooled != nil {
		*s.pooled = s.buf[:0]
		scanBufs.Put(s.pooled)
		s.pooled, s.buf, s.bufAt = nil, nil, -1
	}
}

// next returns the header at the scanner's position and that position.
// It returns io.EOF exactly at limit and errTorn for anything else that is
// not a whole batch inside limit.
func (s *headerScanner) next() (recordbatch.Header, int64, error) {
	var h recordbatch.Header
	if s.pos >= s.limit {
		return h, s.pos, io.EOF
	}
	if s.limit-s.pos < recordbatch.HeaderSize {
		return h, s.pos, fmt.Errorf("%w: %d bytes at position %d", errTorn, s.limit-s.pos, s.pos)
	}
	if s.bufAt < 0 || s.pos < s.bufAt || s.pos+recordbatch.HeaderSize > s.bufAt+int64(len(s.buf)) {
		n := min(int64(scanChunk), s.limit-s.pos)
		if cap(s.buf) < int(n) {
			s.pooled = scanBufs.Get().(*[]byte)
			s.buf = (*s.pooled)[:scanChunk]
		}
		s.buf = s.buf[:n]
		if _, err := s.f.ReadAt(s.buf, s.pos); err != nil {
			s.bufAt = -1
			return h, s.pos, fmt.Errorf("reading %s at %d: %w", s.f.Name(), s.pos, err)
		}
		s.bufAt = s.pos
	}
	h, err := recordbatch.ParseHeader(s.buf[s.pos-s.bufAt:])
	if err != nil {
		return h, s.pos, fmt.Errorf("%w at position %d: %w", errTorn, s.pos, err)
	}
	if int64(h.TotalSize()) > s.limit-s.pos {
		return h, s.pos, fmt.Errorf("%w: batch of %d bytes at position %d exceeds %d", errTorn, h.TotalSize(), s.pos, s.limit)
	}
	p := s.pos
	s.pos += int64(h.TotalSize())
	return h, p, nil
}

// batchReader reads whole batches sequentially (recovery, compaction).
type batchReader struct {
	r     *bufio.Reader
	pos   int64
	limit int64
	buf   []byte
}

func newBatchReader(f io.ReaderAt, limit int64) *batchReader {
	return &batchReader{r: bufio.NewReaderSize(io.NewSectionReader(f, 0, limit), 256<<10), limit: limit}
}

// next returns the next batch (valid until the following call) and its
// position; io.EOF at a clean end, errTorn for a partial or malformed batch.
// Only the framing is checked here; callers Validate as needed.
func (b *batchReader) next() ([]byte, int64, error) {
	pos := b.pos
	if pos >= b.limit {
		return nil, pos, io.EOF
	}
	if b.limit-pos < recordbatch.HeaderSize {
		return nil, pos, fmt.Errorf("%w: %d trailing bytes at %d", errTorn, b.limit-pos, pos)
	}
	head, err := b.r.Peek(12)
	if err != nil {
		return nil, pos, fmt.Errorf("%w at %d: %w", errTorn, pos, err)
	}
	length := int64(int32(binary.BigEndian.Uint32(head[8:])))
	size := 12 + length
	if length < recordbatch.HeaderSize-12 || size > b.limit-pos {
		return nil, pos, fmt.Errorf("%w: length %d at %d", errTorn, length, pos)
	}
	if int64(cap(b.buf)) < size {
		b.buf = make([]byte, size)
	}
	b.buf = b.buf[:size]
	if _, err := io.ReadFull(b.r, b.buf); err != nil {
		return nil, pos, fmt.Errorf("%w at %d: %w", errTorn, pos, err)
	}
	b.pos += size
	return b.buf, pos, nil
}

// locate finds the first batch in the view whose last offset is >= target,
// starting from the offset index's floor entry. found is false when the
// segment holds no such batch (target is past its data).
func (v segView) locate(target int64) (h recordbatch.Header, pos int64, found bool, err error) {
	start := int64(0)
	var want int64 = -1
	if target > v.s.base {
		e, ok, err := v.off.floor(target - v.s.base)
		if err != nil {
			return h, 0, false, err
		}
		if ok && int64(e.pos) < v.size {
			start, want = int64(e.pos), v.s.base+int64(e.rel)
		}
	}
	sc := newHeaderScanner(v.s.log, start, v.size)
	defer func() { sc.done() }() // sc may be replaced below
	for first := true; ; first = false {
		h, pos, err := sc.next()
		if err == io.EOF {
			return h, 0, false, nil
		}
		if first && want >= 0 && (err != nil || h.BaseOffset != want) {
			// The index disagrees with the log (it should never, but a
			// reader must not return garbage): scan from the start.
			sc.done()
			sc = newHeaderScanner(v.s.log, 0, v.size)
			want = -1
			continue
		}
		if err != nil {
			return h, 0, false, err
		}
		if h.LastOffset() >= target {
			return h, pos, true, nil
		}
	}
}

// locateHinted is locate for a fetch: it first tries the position the
// previous fetch that ended at target recorded (readhint.go), which skips
// the offset index search. gen is the Log generation v was taken at.
func (v segView) locateHinted(gen uint64, target int64) (recordbatch.Header, int64, bool, error) {
	if pos, ok := hintFor(v.s, gen, target); ok && pos+recordbatch.HeaderSize <= v.size {
		sc := newHeaderScanner(v.s.log, pos, v.size)
		h, p, err := sc.next()
		sc.done()
		// The batch after one ending at target-1 is the first whose
		// last offset is >= target (its base may be past target where
		// compaction left a gap); anything else means the hint is
		// wrong (it should never be): take the index path.
		if err == nil && h.LastOffset() >= target {
			return h, p, true, nil
		}
	}
	return v.locate(target)
}

// readBatch preads one whole batch.
func (v segView) readBatch(pos int64, size int) ([]byte, error) {
	b := make([]byte, size)
	if _, err := v.s.log.ReadAt(b, pos); err != nil {
		return nil, fmt.Errorf("reading batch at %d of segment %d: %w", pos, v.s.base, err)
	}
	return b, nil
}
