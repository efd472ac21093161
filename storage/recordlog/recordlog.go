// Package recordlog is a CRC'd, self-compacting key/value log in one
// file: the persistence of the group and transaction coordinators.
//
// The file is a sequence of frames (frame.go: length, CRC-32C, key,
// value or tombstone). Opening reads it all, hands every record to an
// Index (the default keeps the last record of each key), truncates a cut
// or damaged tail (logged, never fatal) and refuses damage followed by
// good frames (*CorruptError, with the offset). Writes append whole
// batches with one write(2), fsynced when the log is opened with Fsync.
// When the file has grown past a floor and to Ratio times its live
// records, it is rewritten to them: a temporary file is written and
// fsynced, renamed over the log and the directory fsynced, so a crash at
// any point leaves either the old file or the new one, which hold the
// same live records.
//
// The log also keeps an applied index: the last raft index whose command
// the caller has written, stored in the file as a record under a reserved
// key, written in the same write(2) as the batch it belongs to and after
// its records (a cut write loses the index with or before the records,
// never the records without it), kept by compaction and read back by Open.
package recordlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// Defaults of Options.
const (
	DefaultMaxFrameBytes   = 64 << 20
	DefaultCompactMinBytes = 4 << 20
	DefaultCompactRatio    = 2.0
)

// appliedKey is the reserved key of the applied-index record. No stored
// key can be it: 0xff never occurs in UTF-8 text (transactional ids) and
// a group record key starts with a key version, never -1. Writes of it
// through Put or AppendFrames are refused.
const appliedKey = "\xff\xffregent/recordlog/applied-index"

// appliedVersion is the first byte of the applied-index value.
const appliedVersion = 1

// Options configures a Log. The zero value is valid: LayoutKV, the
// default bounds, no fsync, a key index.
type Options struct {
	Layout Layout
	// MaxFrameBytes bounds a frame's length field, on read and write.
	// 0: DefaultMaxFrameBytes.
	MaxFrameBytes int
	// Fsync: fsync after every write. Otherwise a write is in the OS
	// when it returns (a kill -9 loses nothing), on disk after Sync.
	Fsync bool
	// CompactMinBytes: the file is not rewritten below this size.
	// 0: DefaultCompactMinBytes; negative: never.
	CompactMinBytes int64
	// CompactRatio: the file is rewritten when its size exceeds this
	// many times its live bytes. 0: DefaultCompactRatio; at least 1.
	CompactRatio float64
	// Index keeps the live records; nil: the last record of every key.
	Index  Index
	Logger *slog.Logger

	// compactHook, for tests, is called between the steps of a
	// compaction; an error stops it there as a crash would (nothing is
	// cleaned up, the log refuses further writes).
	compactHook func(stage string) error
	// syncHook, for tests, is called by Sync after it took the file and
	// before its fsync.
	syncHook func()
}

func (o *Options) validate() error {
	if o.Layout != LayoutKV && o.Layout != LayoutKey16 {
		return fmt.Errorf("recordlog: unknown layout %d", o.Layout)
	}
	if o.MaxFrameBytes == 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.MaxFrameBytes < 64 || o.MaxFrameBytes > 1<<30 {
		return fmt.Errorf("recordlog: MaxFrameBytes %d out of range", o.MaxFrameBytes)
	}
	if o.CompactMinBytes == 0 {
		o.CompactMinBytes = DefaultCompactMinBytes
	}
	if o.CompactRatio == 0 {
		o.CompactRatio = DefaultCompactRatio
	}
	if o.CompactRatio < 1 {
		return fmt.Errorf("recordlog: CompactRatio %v below 1", o.CompactRatio)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Log is one record log file. Safe for concurrent use; see Index for the
// lock order with a caller's own index.
type Log struct {
	path string
	o    Options

	mu struct {
		sync.Mutex
		f *os.File // nil once closed
		// size is the file's length: the end of the last good frame.
		size  int64
		index Index
		// applied is the applied index; appliedLen the size of its
		// frame in the file (0: none yet).
		applied    uint64
		appliedLen int64
		// broken is the error that left the file in a state nothing
		// may be appended to (a write that failed part-way, a
		// compaction that failed after its rename).
		broken error
		// writes counts the writes since Open (1 at Open: what an
		// earlier process wrote may not be on disk yet); synced is the
		// count the last successful Sync covered. Sync with nothing
		// written since skips its fsync, which on most disks is a cache
		// flush even when no page is dirty: an idle store costs no I/O
		// at the broker's flush interval.
		writes, synced uint64
	}
}

// Open opens the log at path, creating it (and its directory) if needed,
// and reads it. A leftover temporary file of a compaction that never
// reached its rename is removed: the log beside it is intact.
func Open(path string, o Options) (*Log, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Index == nil {
		o.Index = newKeyIndex()
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("recordlog: create %s: %w", dir, err)
	}
	if err := os.Remove(path + ".tmp"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("recordlog: remove stale compaction file: %w", err)
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("recordlog: open %s: %w", path, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// Make the new file's name durable.
		if err := syncDir(dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("recordlog: read %s: %w", path, err)
	}
	l := &Log{path: path, o: o}
	l.mu.index = o.Index
	good, err := scan(raw, o.Layout, o.MaxFrameBytes, func(r Record) {
		if string(r.Key) == appliedKey {
			if v, ok := decodeApplied(r); ok {
				l.mu.applied, l.mu.appliedLen = v, int64(len(r.Frame))
			} else {
				o.Logger.Warn("unreadable applied-index record", "path", path)
			}
			return
		}
		// Copy: the index would otherwise keep the whole file alive.
		r = cloneRecord(o.Layout, r)
		o.Index.Add(r)
	})
	if err != nil {
		f.Close()
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Path = path
		}
		return nil, err
	}
	if good < int64(len(raw)) {
		o.Logger.Warn("record log has a cut or damaged tail; truncating", "path", path,
			"valid_bytes", good, "file_bytes", len(raw))
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("recordlog: truncate %s: %w", path, err)
		}
	}
	l.mu.f, l.mu.size, l.mu.writes = f, good, 1
	return l, nil
}

func cloneRecord(ly Layout, r Record) Record {
	frame := append([]byte(nil), r.Frame...)
	// The copy parsed as the original was.
	key, value, tomb, _ := ly.ParseBody(frame[frameHeader:])
	return Record{Key: key, Value: value, Tombstone: tomb, Frame: frame}
}

func decodeApplied(r Record) (uint64, bool) {
	if r.Tombstone || len(r.Value) != 9 || r.Value[0] != appliedVersion {
		return 0, false
	}
	return binary.BigEndian.Uint64(r.Value[1:]), true
}

func (l *Log) appliedFrame(idx uint64) []byte {
	v := binary.BigEndian.AppendUint64([]byte{appliedVersion}, idx)
	return l.o.Layout.AppendFrame(nil, []byte(appliedKey), v, false)
}

// Path is the log's file.
func (l *Log) Path() string { return l.path }

// AppliedIndex is the last applied index written (ok false: none ever).
func (l *Log) AppliedIndex() (idx uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.applied, l.mu.appliedLen > 0
}

// Size is the file's length in bytes.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.size
}

// LiveBytes is the size of the live frames (what a compaction keeps).
func (l *Log) LiveBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.index.LiveBytes() + l.mu.appliedLen
}

// Range calls fn with every live record, in the Index's order, until fn
// returns false. fn must not call into the log.
func (l *Log) Range(fn func(Record) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.index.Live(fn)
}

// Put writes key's value; see Write for the failure semantics.
func (l *Log) Put(key, value []byte) error {
	b := l.NewBatch()
	b.Put(key, value)
	return l.Write(b)
}

// Delete writes a tombstone for key; see Write.
func (l *Log) Delete(key []byte) error {
	b := l.NewBatch()
	b.Delete(key)
	return l.Write(b)
}

// Entry is one record of PutBatch.
type Entry struct {
	Key, Value []byte
	Tombstone  bool
}

// PutBatch writes entries with one write(2); see Write.
func (l *Log) PutBatch(entries []Entry) error {
	b := l.NewBatch()
	for _, e := range entries {
		if e.Tombstone {
			b.Delete(e.Key)
		} else {
			b.Put(e.Key, e.Value)
		}
	}
	return l.Write(b)
}

// SetAppliedIndex writes the applied index alone (a command that changed
// nothing in this log); see Write.
func (l *Log) SetAppliedIndex(idx uint64) error {
	b := l.NewBatch()
	b.SetAppliedIndex(idx)
	return l.Write(b)
}

// Write appends b's records, and its applied index after them, with one
// write(2). When it returns nil they are in the OS, and on disk if the
// log fsyncs; then they are in the index. On an error from the file
// nothing may be assumed about what reached it, and the log refuses every
// later write (so that a cut frame is never followed by good ones) until
// it is reopened, which drops a cut tail. An error in b itself (a
// refused key, an applied index going backwards) writes nothing and
// leaves the log usable.
//
// The log keeps b's bytes (the index holds slices of them): b must not
// be used after Write.
func (l *Log) Write(b *Batch) error {
	if b.err != nil {
		return b.err
	}
	if b.n == 0 && !b.hasApplied {
		return nil
	}
	recs := b.buf
	buf := recs
	var af []byte
	if b.hasApplied {
		af = l.appliedFrame(b.applied)
		buf = append(buf, af...)
	}
	b.buf, b.err = nil, errors.New("recordlog: batch used after Write")

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.broken != nil {
		return fmt.Errorf("recordlog %s unusable after an earlier error: %w", l.path, l.mu.broken)
	}
	if l.mu.f == nil {
		return fmt.Errorf("recordlog %s is closed", l.path)
	}
	if b.hasApplied && l.mu.appliedLen > 0 && b.applied < l.mu.applied {
		// Invariant: the applied index only grows.
		return fmt.Errorf("recordlog %s: applied index %d below %d", l.path, b.applied, l.mu.applied)
	}
	if _, err := l.mu.f.Write(buf); err != nil {
		l.mu.broken = err
		return fmt.Errorf("recordlog: write %s: %w", l.path, err)
	}
	l.mu.writes++
	if l.o.Fsync {
		if err := l.mu.f.Sync(); err != nil {
			l.mu.broken = err
			return fmt.Errorf("recordlog: fsync %s: %w", l.path, err)
		}
		l.mu.synced = l.mu.writes
	}
	l.mu.size += int64(len(buf))
	for pos := 0; pos < len(recs); {
		// The batch built or checked every frame: no second checksum.
		end := pos + 4 + int(binary.BigEndian.Uint32(recs[pos:]))
		key, value, tomb, err := l.o.Layout.ParseBody(recs[pos+frameHeader : end])
		if err != nil {
			l.mu.broken = fmt.Errorf("batch frame at %d: %w", pos, err)
			return l.mu.broken
		}
		l.mu.index.Add(Record{Key: key, Value: value, Tombstone: tomb, Frame: recs[pos:end:end]})
		pos = end
	}
	if b.hasApplied {
		l.mu.applied, l.mu.appliedLen = b.applied, int64(len(af))
	}
	l.maybeCompactLocked()
	return nil
}

func (l *Log) maybeCompactLocked() {
	if l.o.CompactMinBytes < 0 || l.mu.size <= l.o.CompactMinBytes {
		return
	}
	live := l.mu.index.LiveBytes() + l.mu.appliedLen
	if float64(l.mu.size) <= l.o.CompactRatio*float64(live) {
		return
	}
	if err := l.compactLocked(); err != nil {
		// Before its rename the old file is intact and a later write
		// tries again; after it, the log is broken (compactLocked).
		l.o.Logger.Error("compact record log", "path", l.path, "err", err)
	}
}

// Compact rewrites the file to its live records now.
func (l *Log) Compact() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.broken != nil {
		return fmt.Errorf("recordlog %s unusable after an earlier error: %w", l.path, l.mu.broken)
	}
	if l.mu.f == nil {
		return fmt.Errorf("recordlog %s is closed", l.path)
	}
	return l.compactLocked()
}

// compactLocked rewrites the file to the live records and the applied
// index: written to path.tmp and fsynced, renamed over path, directory
// fsynced, then the new file is what later writes append to.
func (l *Log) compactLocked() error {
	tmp := l.path + ".tmp"
	hook := l.o.compactHook
	if hook == nil {
		hook = func(string) error { return nil }
	}
	crashed := func(err error) error {
		l.mu.broken = err
		return err
	}
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("recordlog: create %s: %w", tmp, err)
	}
	abandon := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	var size int64
	buf := make([]byte, 0, 1<<20)
	var werr error
	flush := func() {
		if werr == nil && len(buf) > 0 {
			_, werr = f.Write(buf)
			size += int64(len(buf))
		}
		buf = buf[:0]
	}
	l.mu.index.Live(func(r Record) bool {
		buf = append(buf, r.Frame...)
		if len(buf) >= 1<<20 {
			flush()
		}
		return werr == nil
	})
	if l.mu.appliedLen > 0 {
		buf = append(buf, l.appliedFrame(l.mu.applied)...)
	}
	flush()
	if werr != nil {
		return abandon(fmt.Errorf("recordlog: write %s: %w", tmp, werr))
	}
	if err := hook("written"); err != nil {
		return crashed(err)
	}
	if err := f.Sync(); err != nil {
		return abandon(fmt.Errorf("recordlog: fsync %s: %w", tmp, err))
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("recordlog: close %s: %w", tmp, err)
	}
	if err := hook("synced"); err != nil {
		return crashed(err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("recordlog: rename %s: %w", tmp, err)
	}
	// From here the file at path is the new one while l.mu.f is the
	// old: any failure leaves the log unwritable until reopened.
	if err := hook("renamed"); err != nil {
		return crashed(err)
	}
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		return crashed(err)
	}
	nf, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return crashed(fmt.Errorf("recordlog: reopen %s: %w", l.path, err))
	}
	l.mu.f.Close()
	l.mu.f, l.mu.size = nf, size
	l.o.Logger.Debug("compacted record log", "path", l.path, "bytes", size)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("recordlog: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("recordlog: fsync dir %s: %w", dir, err)
	}
	return nil
}

// Sync fsyncs the file (the broker's flush interval when the log does
// not fsync every write).
//
// The fsync runs outside the log's lock: writes go on meanwhile (an
// OffsetCommit does not wait for the periodic fsync of its group store).
// What Sync promises is what was written before it was called. If a
// compaction replaces the file during the fsync, those records are in
// the new file, which the compaction fsynced before its rename; if Close
// closes it, Close fsyncs it (and reports its own failure). Either way
// the old descriptor's fsync may fail (closed) without a loss to report.
// With nothing written since the last Sync that succeeded, there is no
// fsync.
func (l *Log) Sync() error {
	l.mu.Lock()
	f, writes := l.mu.f, l.mu.writes
	clean := writes == l.mu.synced
	l.mu.Unlock()
	if f == nil || clean {
		return nil
	}
	if l.o.syncHook != nil {
		l.o.syncHook()
	}
	err := f.Sync()
	if err == nil {
		l.mu.Lock()
		l.mu.synced = max(l.mu.synced, writes)
		l.mu.Unlock()
		return nil
	}
	l.mu.Lock()
	replaced := l.mu.f != f
	l.mu.Unlock()
	if replaced {
		return nil
	}
	return fmt.Errorf("recordlog: fsync %s: %w", l.path, err)
}

// Close fsyncs and closes the file. Later writes fail; Close again is a
// no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.f == nil {
		return nil
	}
	var err error
	if l.mu.broken == nil {
		err = l.mu.f.Sync()
	}
	if cerr := l.mu.f.Close(); err == nil {
		err = cerr
	}
	l.mu.f = nil
	if err != nil {
		return fmt.Errorf("recordlog: close %s: %w", l.path, err)
	}
	return nil
}
