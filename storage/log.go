// Package storage is Regent's segmented partition log: Kafka-format segment
// files (<base>.log, .index, .timeindex), crash recovery, retention,
// compaction and the leader-epoch cache.
//
// # Concurrency contract
//
// A Log has one owner goroutine (the partition actor). Only the owner calls
// Append, AppendAt, AppendMany, AppendManyAt, Truncate, DeleteRecordsBefore,
// EnforceRetention, RetentionOffset, Compact, CompactRange, AssignEpoch,
// SetOptions, Close and Delete, and never two at once.
//
// # Determinism
//
// A replicated partition applies the same commands on every node, so what
// changes offsets must depend only on those commands: segment.ms compares
// record timestamps (records without any: AppendAt's time, the command's
// clock), and the leader turns retention into a DeleteRecordsBefore offset
// (RetentionOffset) that every node applies, and compaction into a plan in
// offsets (PlanCompaction) that every node applies (CompactRange). Segment
// boundaries may still differ between nodes (records without timestamps in
// a segment reopened since its first append; a follower that rolled to
// clean what its active segment held); the start and end offsets, and the
// records compaction keeps, do not.
//
// Read, OffsetForTimestamp, MaxTimestamp, StartOffset, NextOffset, Size,
// EndOffsetForEpoch, LatestEpoch, DirtyRatio, NeedsCompaction,
// PlanCompaction and Sync may be called from any goroutine concurrently
// with the owner.
//
// Implementation: the owner writes segment files without holding the lock
// (segments are append-only and readers never look past the committed size)
// and then publishes the new size, offsets and index entries under mu. Readers
// snapshot what they need under mu.RLock, take a reference on the segment and
// do their preads unlocked. Segment descriptors are opened on demand
// through a FileCache shared by all logs (filecache.go), so open files are
// bounded by the cache, not by the partition count. Deleted segments are
// unlinked but their descriptors are pinned open until the last reader
// releases them. The one
// destructive in-place change, Truncate, bumps mu.gen; a reader that sees gen
// change across its pread retries.
package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/regent-broker/regent/storage/atomicfile"
)

var (
	// ErrOffsetOutOfRange is returned for offsets below StartOffset or
	// above NextOffset.
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("storage: log closed")
)

// Log is one partition's log. See the package documentation for which
// methods may run concurrently.
type Log struct {
	dir    string
	logger *slog.Logger
	files  *FileCache // Options.Files at Open; every segment's descriptors

	// persistMu serialises checkpoint-file writes that may come from
	// different goroutines (epoch assignment vs. owner operations).
	persistMu sync.Mutex

	// syncMu serialises Syncs: a segment's needsSync is cleared before its
	// fsync, so a second Sync running meanwhile would skip that segment
	// and report success before the data were on disk. It guards
	// syncFailed.
	syncMu sync.Mutex
	// syncFailed is the first fsync error; every later Sync returns it.
	// After a failed fsync the kernel may have dropped the dirty pages and
	// marked them clean, so a retry can succeed without the data being on
	// disk: nothing written before or after may be called durable again
	// (Kafka takes the log directory offline).
	syncFailed error
	// dirSynced is the segment list (first, last, count) the directory
	// was last fsynced with; guarded by syncMu. Sync skips the directory's
	// fsync while the list is the same: no segment file was created or
	// removed since (compaction, which renames files in place, fsyncs the
	// directory itself).
	dirSynced struct {
		first, last *segment
		n           int
	}

	mu struct {
		sync.RWMutex
		segs       []*segment // ascending base; the last is the active segment
		start      int64      // log start offset
		next       int64      // log end offset
		size       int64      // bytes across segment log files
		gen        uint64     // bumped by in-place truncation
		closed     bool
		opts       Options
		epochs     []epochEntry
		firstDirty int64 // compaction: offsets below this are clean
		// nextHorizon is the earliest delete horizon of a kept tombstone
		// batch, when a pass could drop it even with nothing dirty;
		// MinInt64 (unknown, so due) until the first pass after Open.
		nextHorizon int64
	}
}

// Open opens or creates the log in dir and recovers it: leftover compaction
// files are resolved, closed segments get their indexes checked (and rebuilt
// if missing or corrupt), and unless the previous Close was clean the active
// segment is fully re-validated and a torn or corrupt tail truncated.
//
// When dir did not exist and Open fails, the directory is removed again: a
// failed create leaves nothing behind. An existing log is never removed.
func Open(dir string, opts Options) (*Log, error) {
	_, statErr := os.Stat(dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating log dir: %w", err)
	}
	l := &Log{dir: dir, logger: slog.Default().With("log", dir), files: opts.Files}
	if l.files == nil {
		l.files = DefaultFileCache()
	}
	l.mu.opts = opts.withDefaults()
	l.mu.nextHorizon = math.MinInt64
	if err := l.load(); err != nil {
		for _, s := range l.mu.segs {
			s.release()
		}
		if created {
			if rerr := os.RemoveAll(dir); rerr != nil {
				err = errors.Join(err, fmt.Errorf("removing the new log dir again: %w", rerr))
			}
		}
		return nil, fmt.Errorf("opening log %s: %w", dir, err)
	}
	return l, nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

func (l *Log) opts() Options {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.opts
}

// SetOptions replaces the configuration; it applies to subsequent appends,
// rolls, retention and compaction passes.
func (l *Log) SetOptions(opts Options) {
	l.mu.Lock()
	l.mu.opts = opts.withDefaults()
	l.mu.Unlock()
}

// StartOffset is the log start offset, the first readable offset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.start
}

// NextOffset is the log end offset, the offset the next append gets.
func (l *Log) NextOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.next
}

// Size is the total size of the segment log files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.size
}

// active returns the active segment (owner, or with mu held).
func (l *Log) active() *segment { return l.mu.segs[len(l.mu.segs)-1] }

// segmentFor returns the index of the last segment with base <= offset, or
// -1. Caller holds mu.
func (l *Log) segmentFor(offset int64) int {
	segs := l.mu.segs
	return sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
}

// Sync writes pending index entries and fsyncs the segments written since
// the last Sync, then the directory if segments came or went. When it
// returns nil, everything appended before it was called is on disk. Once
// an fsync has failed, every later Sync fails with that error (see
// syncFailed).
//
// The active segment's indexes are not fsynced, only its log file: after a
// crash the active segment's indexes are rebuilt from the log (recover.go),
// and with --fsync always Sync runs once per group of produces, where the
// two index fsyncs and the directory's more than tripled its time (about
// 0.8 ms against 0.26 ms for the log file alone, measured on the dev VM's
// disk). The segment is marked indexesNeedSync, so that the Sync after it
// rolls, and Close, fsync its indexes too; an active segment with nothing
// written since the last Sync is not fsynced again.
func (l *Log) Sync() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.syncFailed != nil {
		return l.syncFailed
	}
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	var todo []*segment
	var errs []error
	active := l.active()
	first, n := l.mu.segs[0], len(l.mu.segs)
	for _, s := range l.mu.segs {
		if err := s.flushIndexes(); err != nil {
			errs = append(errs, err)
		}
		if s.acquire() {
			todo = append(todo, s)
		}
	}
	l.mu.Unlock()
	fsyncFailed := false
	for _, s := range todo {
		var err error
		switch {
		case s == active:
			if s.needsSync.Swap(false) {
				s.indexesNeedSync.Store(true)
				err = s.syncData()
			}
		case s.needsSync.Swap(false), s.indexesNeedSync.Swap(false):
			s.indexesNeedSync.Store(false)
			err = s.sync()
		}
		if err != nil {
			s.needsSync.Store(true)
			errs = append(errs, err)
			fsyncFailed = true
		}
		s.release()
	}
	if d := &l.dirSynced; d.first != first || d.last != active || d.n != n {
		if err := atomicfile.SyncDir(l.dir); err != nil {
			errs = append(errs, err)
			fsyncFailed = true
		} else {
			d.first, d.last, d.n = first, active, n
		}
	}
	err := errors.Join(errs...)
	if fsyncFailed {
		l.syncFailed = fmt.Errorf("%w (an earlier fsync of log %s failed: nothing written since is durable)", err, l.dir)
	}
	return err
}

// Dirty reports whether Sync would have anything to do: a segment written
// since its fsync, a sealed segment's indexes not yet fsynced, a changed
// segment list for the directory, or an earlier failure to report. The
// broker's interval flush asks it first, so that an idle partition costs
// nothing per flush. A Sync in progress counts as dirty (it is not waited
// for).
func (l *Log) Dirty() bool {
	if !l.syncMu.TryLock() {
		return true
	}
	defer l.syncMu.Unlock()
	if l.syncFailed != nil {
		return true
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return false
	}
	active := l.active()
	for _, s := range l.mu.segs {
		if s.needsSync.Load() || (s != active && s.indexesNeedSync.Load()) {
			return true
		}
	}
	d := &l.dirSynced
	return d.first != l.mu.segs[0] || d.last != active || d.n != len(l.mu.segs)
}

// Close syncs the log, records a clean shutdown (so the next Open can trust
// the indexes instead of re-validating the active segment) and releases the
// files. Readers in flight finish on their own references; new calls get
// ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	segs := l.mu.segs
	var errs []error
	// A final time entry makes the active segment's max timestamp survive
	// the reopen without a scan.
	if err := l.active().maybeTimeEntry(); err != nil {
		errs = append(errs, err)
	}
	for _, s := range segs {
		if err := s.flushIndexes(); err != nil {
			errs = append(errs, err)
		}
	}
	l.mu.Unlock()
	// After a failed fsync a later one can succeed with the data lost
	// (syncFailed): the log must not be marked clean, so the next Open
	// re-validates the active segment instead of trusting its indexes.
	l.syncMu.Lock()
	if l.syncFailed != nil {
		errs = append(errs, fmt.Errorf("not marked clean, an earlier fsync failed: %w", l.syncFailed))
	}
	l.syncMu.Unlock()
	for _, s := range segs {
		if needs, idx := s.needsSync.Swap(false), s.indexesNeedSync.Swap(false); needs || idx {
			if err := s.sync(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := atomicfile.SyncDir(l.dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := writeFileAtomic(l.dir, cleanShutdownFile, nil); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range segs {
		s.release()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing log %s: %w", l.dir, err)
	}
	return nil
}

// Delete closes the log and removes its directory (DeleteTopics).
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := os.RemoveAll(l.dir); err != nil {
		return errors.Join(cerr, fmt.Errorf("removing log dir: %w", err))
	}
	return nil
}

// removeSegments unlinks segments already taken out of mu.segs and drops the
// Log's reference (owner, without mu).
func (l *Log) removeSegments(segs []*segment) error {
	var errs []error
	for _, s := range segs {
		pinFiles(l.logger, s)
		if err := s.removeFiles(); err != nil {
			errs = append(errs, fmt.Errorf("removing segment %d: %w", s.base, err))
		}
		s.release()
	}
	return errors.Join(errs...)
}

// createSegment makes a fresh, empty segment at base, replacing any stale
// files with that name.
func (l *Log) createSegment(base int64) (*segment, error) {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if err := os.Remove(segmentFile(l.dir, base, suf)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("clearing stale segment %d: %w", base, err)
		}
	}
	s, err := openSegment(l.files, l.dir, base, true)
	if err != nil {
		return nil, err
	}
	s.needsSync.Store(true)
	return s, nil
}

func (l *Log) persistStart(off int64) error {
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	// It comes before the segments below off are deleted, so on a full
	// disk it may use the reserve: otherwise nothing could ever go.
	return CurrentReserve().WithRoom("moving the log start of "+l.dir, func() error {
		return writeOffsetCheckpoint(l.dir, startOffsetFile, off)
	})
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func join(dir, name string) string { return filepath.Join(dir, name) }
