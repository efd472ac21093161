package storage

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Sparse index files, Kafka layout:
//
//	.index      relative offset uint32 | file position uint32   (8 bytes)
//	.timeindex  timestamp int64        | relative offset uint32 (12 bytes)
//
// Offset entries point at the first byte of a batch whose base offset is
// base+rel. A time entry (T, rel) says: T is the largest batch max timestamp
// seen so far in the segment and rel is the first batch that reached it, so
// every batch before rel has a max timestamp < T. Both files are strictly
// increasing in their key.

type idxEntry struct {
	rel uint32
	pos uint32
}

type timeEntry struct {
	ts  int64
	rel uint32
}

// codec describes one index file's entry encoding.
type codec[E any] struct {
	size int
	put  func([]byte, E)
	get  func([]byte) E
	key  func(E) int64
}

var offsetCodec = codec[idxEntry]{
	size: 8,
	put: func(b []byte, e idxEntry) {
		binary.BigEndian.PutUint32(b, e.rel)
		binary.BigEndian.PutUint32(b[4:], e.pos)
	},
	get: func(b []byte) idxEntry {
		return idxEntry{rel: binary.BigEndian.Uint32(b), pos: binary.BigEndian.Uint32(b[4:])}
	},
	key: func(e idxEntry) int64 { return int64(e.rel) },
}

var timeCodec = codec[timeEntry]{
	size: 12,
	put: func(b []byte, e timeEntry) {
		binary.BigEndian.PutUint64(b, uint64(e.ts))
		binary.BigEndian.PutUint32(b[8:], e.rel)
	},
	get: func(b []byte) timeEntry {
		return timeEntry{ts: int64(binary.BigEndian.Uint64(b)), rel: binary.BigEndian.Uint32(b[8:])}
	},
	key: func(e timeEntry) int64 { return e.ts },
}

// Tail-cache sizing: the newest entries stay in memory so tailing readers
// never touch the index file, but memory per segment stays bounded no matter
// how large the segment grows. Entries are written to the file in chunks.
const (
	memIndexMax  = 1024 // trim the cache to memIndexMax/2 when it exceeds this
	flushEntries = 256  // write pending entries once this many accumulate
)

// tailIndex is one index file plus an in-memory cache of its newest entries.
//
// Invariant: mem holds entries [total-len(mem), total) and flushed >=
// total-len(mem), so every entry is in mem, in the file, or both.
// mem and flushed are read by concurrent readers under Log.mu (RLock) and
// replaced by the owner under Log.mu (Lock); mem's backing array is never
// written below a published length (trimming copies), so a reader's snapshot
// stays valid without the lock. total and the file writes are owner-only.
type tailIndex[E any] struct {
	c       codec[E]
	f       *lazyFile
	mem     []E
	flushed int64
	total   int64
}

// add appends an entry (owner only; caller holds Log.mu for writing).
func (t *tailIndex[E]) add(e E) error {
	t.mem = append(t.mem, e)
	t.total++
	if t.total-t.flushed >= flushEntries {
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(t.mem) > memIndexMax {
		keep := make([]E, memIndexMax/2, memIndexMax)
		copy(keep, t.mem[len(t.mem)-memIndexMax/2:])
		t.mem = keep
	}
	return nil
}

// flush writes every entry not yet in the file. If an earlier flush failed
// and the cache was trimmed meanwhile, the lost entries are skipped: the
// file stays sorted, just sparser, and the index is only an accelerator
// (lookups take the floor entry and scan forward from it).
func (t *tailIndex[E]) flush() error {
	n := int(min(t.total-t.flushed, int64(len(t.mem))))
	if n <= 0 {
		t.total = t.flushed
		return nil
	}
	buf := make([]byte, n*t.c.size)
	first := len(t.mem) - n
	for i := range n {
		t.c.put(buf[i*t.c.size:], t.mem[first+i])
	}
	if _, err := t.f.WriteAt(buf, t.flushed*int64(t.c.size)); err != nil {
		return fmt.Errorf("writing index %s: %w", t.f.Name(), err)
	}
	t.flushed += int64(n)
	t.total = t.flushed
	return nil
}

// reset empties the index and its file (used when rebuilding).
func (t *tailIndex[E]) reset() error {
	if err := t.f.Truncate(0); err != nil {
		return fmt.Errorf("truncating index %s: %w", t.f.Name(), err)
	}
	t.mem, t.flushed, t.total = nil, 0, 0
	return nil
}

// loadTail sets the counters from the file (n entries) and caches its last
// entries, for a segment reopened as the active one.
func (t *tailIndex[E]) loadTail(n int64) error {
	t.flushed, t.total = n, n
	k := min(n, memIndexMax/2)
	buf := make([]byte, int(k)*t.c.size)
	if _, err := t.f.ReadAt(buf, (n-k)*int64(t.c.size)); err != nil {
		return fmt.Errorf("reading index %s: %w", t.f.Name(), err)
	}
	t.mem = make([]E, k)
	for i := range t.mem {
		t.mem[i] = t.c.get(buf[i*t.c.size:])
	}
	return nil
}

// dropMem releases the cache once the segment is closed; the file is
// complete by then (caller flushed).
func (t *tailIndex[E]) dropMem() { t.mem = nil }

// last returns the newest entry.
func (t *tailIndex[E]) last() (E, bool, error) {
	if len(t.mem) > 0 {
		return t.mem[len(t.mem)-1], true, nil
	}
	var zero E
	if t.total == 0 {
		return zero, false, nil
	}
	return t.fileEntry(t.total - 1)
}

func (t *tailIndex[E]) fileEntry(i int64) (E, bool, error) {
	var zero E
	buf := make([]byte, t.c.size)
	if _, err := t.f.ReadAt(buf, i*int64(t.c.size)); err != nil {
		return zero, false, fmt.Errorf("reading index %s entry %d: %w", t.f.Name(), i, err)
	}
	return t.c.get(buf), true, nil
}

// indexView is a reader's snapshot of a tailIndex, taken under Log.mu.
type indexView[E any] struct {
	t       *tailIndex[E]
	mem     []E
	flushed int64
}

func (t *tailIndex[E]) view() indexView[E] {
	return indexView[E]{t: t, mem: t.mem, flushed: t.flushed}
}

// floor returns the last entry whose key is <= target.
func (v indexView[E]) floor(target int64) (E, bool, error) {
	var zero E
	key := v.t.c.key
	if len(v.mem) > 0 && key(v.mem[0]) <= target {
		i := sort.Search(len(v.mem), func(i int) bool { return key(v.mem[i]) > target })
		return v.mem[i-1], true, nil
	}
	// Binary search the file with small preads; the page cache keeps the
	// hot part of the index resident, as Kafka's mmap does.
	var ferr error
	buf := make([]byte, v.t.c.size)
	n := int(v.flushed)
	i := sort.Search(n, func(i int) bool {
		if ferr != nil {
			return true
		}
		if _, err := v.t.f.ReadAt(buf, int64(i)*int64(v.t.c.size)); err != nil {
			ferr = err
			return true
		}
		return key(v.t.c.get(buf)) > target
	})
	if ferr != nil {
		return zero, false, fmt.Errorf("searching index %s: %w", v.t.f.Name(), ferr)
	}
	if i == 0 {
		return zero, false, nil
	}
	if _, err := v.t.f.ReadAt(buf, int64(i-1)*int64(v.t.c.size)); err != nil {
		return zero, false, fmt.Errorf("reading index %s: %w", v.t.f.Name(), err)
	}
	return v.t.c.get(buf), true, nil
}
