package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// Deferred fsync of the raft log (RaftOptions.LogSyncInterval).
//
// raft-wal fsyncs its tail segment at the end of every StoreLogs. With a
// sync interval the node's segment files go through lazySyncFS instead:
// StoreLogs still writes every entry into the file (the page cache) before
// it returns, so a killed process loses nothing it acknowledged, but the
// fsync is left to a background pass every interval. This is the broker's
// --fsync=interval policy applied to the raft log, as Kafka's replicas do
// not fsync before acknowledging: a power loss on a majority can lose the
// last interval's commits. What raft-wal needs to open the log again is
// still made durable at once, as it does it:
//   - a segment's first write (its file header and first entries), whose
//     fsync also makes its directory entry durable (raft-wal's File syncs
//     the parent directory on a file's first fsync): raft-wal's meta store
//     names the file before it is written, and a tail with no header or
//     no directory entry would not open;
//   - the write that seals a segment, before raft-wal's meta store (which
//     fsyncs on its own) records the segment as sealed: a sealed segment
//     whose index was lost would not open again;
//   - every file at Close.
// After a power loss the tail is what raft-wal recovers from any crash: the
// entries up to the last commit frame on disk.
//
// Votes and terms live in raft-wal's meta store, not in segment files: they
// stay durable before SetStable returns.
//
// Why: a commit waits for the leader's StoreLogs and then a follower's,
// one after the other, and each fsync of fresh preallocated segment pages
// commits the file system's journal. Measured on the shared 2-core VM
// (3 nodes, Kafka's ProducerPerformance acks=all, 1 KiB records, 6
// partitions, 300k records, runs alternated, load average 25-98): the
// leader's StoreLogs took 15-39 ms with an fsync each and 3.6-4.1 ms
// deferred; throughput 6.5 and 13.1 MB/s against 14.2 and 17.6.

// lazySyncFS is a raft-wal VFS over the real file system whose writable
// files defer Sync to a background pass.
type lazySyncFS struct {
	*walfs.FS
	log   *slog.Logger
	every time.Duration

	// mu guards files: the writable files open now (added by Create and
	// OpenWriter on raft-wal's goroutines, removed by their Close).
	mu    sync.Mutex
	files map[*lazyFile]struct{}

	// fsyncs counts the segment fsyncs made (for tests and debugging).
	fsyncs atomic.Int64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// newLazySyncFS starts the background sync pass; close stops it.
func newLazySyncFS(every time.Duration, log *slog.Logger) *lazySyncFS {
	fs := &lazySyncFS{
		FS: walfs.New(), log: log, every: every,
		files: map[*lazyFile]struct{}{},
		stop:  make(chan struct{}), done: make(chan struct{}),
	}
	go fs.run()
	return fs
}

// Create implements types.VFS.
func (fs *lazySyncFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := fs.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return fs.track(f, name), nil
}

// OpenWriter implements types.VFS.
func (fs *lazySyncFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := fs.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return fs.track(f, name), nil
}

func (fs *lazySyncFS) track(f types.WritableFile, name string) *lazyFile {
	lf := &lazyFile{WritableFile: f, fs: fs, name: name}
	fs.mu.Lock()
	fs.files[lf] = struct{}{}
	fs.mu.Unlock()
	return lf
}

// run fsyncs the files written since the last pass, every interval.
func (fs *lazySyncFS) run() {
	defer close(fs.done)
	t := time.NewTicker(fs.every)
	defer t.Stop()
	for {
		select {
		case <-fs.stop:
			return
		case <-t.C:
			if err := fs.syncAll(); err != nil {
				// The next pass tries again; StoreLogs goes on, as with
				// the broker's own interval fsync.
				fs.log.Error("raft log fsync failed", "err", err)
			}
		}
	}
}

// syncAll fsyncs every open file written since its last fsync. It holds
// mu meanwhile, so a file cannot be closed under it.
func (fs *lazySyncFS) syncAll() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	for f := range fs.files {
		if err := f.syncIfDirty(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close stops the background pass and fsyncs what is still open.
func (fs *lazySyncFS) close() error {
	fs.once.Do(func() { close(fs.stop) })
	<-fs.done
	return fs.syncAll()
}

// lazyFile is one raft-wal segment file opened for writing. raft-wal
// writes it from one goroutine at a time (under its write lock); the
// background pass only fsyncs it.
type lazyFile struct {
	types.WritableFile
	fs   *lazySyncFS
	name string
	// dirty is set by every write and cleared before an fsync.
	dirty atomic.Bool
	// syncMu serializes fsyncs of this file (the background pass and a
	// sealing write's own), so a cleared dirty flag is never followed by
	// an fsync that started before the write.
	syncMu sync.Mutex
	// syncNext is set by a file's first write and by the write that
	// seals it; the next Sync is then real. Written and read on raft-wal's
	// writing goroutine.
	syncNext bool
}

// WriteAt implements io.WriterAt.
func (f *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	if off == 0 || sealsSegment(p, off) {
		f.syncNext = true
	}
	n, err := f.WritableFile.WriteAt(p, off)
	// Marked after the write: a pass that clears the flag from here on
	// fsyncs after the bytes are in the file.
	f.dirty.Store(true)
	return n, err
}

// Sync implements types.WritableFile: real after a segment's first write
// and the one that seals it, deferred to the background pass otherwise.
func (f *lazyFile) Sync() error {
	if !f.syncNext {
		return nil
	}
	f.syncNext = false
	return f.syncIfDirty()
}

func (f *lazyFile) syncIfDirty() error {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	if !f.dirty.Swap(false) {
		return nil
	}
	if err := f.WritableFile.Sync(); err != nil {
		f.dirty.Store(true)
		return fmt.Errorf("fsync raft segment %s: %w", f.name, err)
	}
	f.fs.fsyncs.Add(1)
	return nil
}

// Close fsyncs what was written since the last fsync, then closes.
func (f *lazyFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.files, f)
	f.fs.mu.Unlock()
	err := f.syncIfDirty()
	if cerr := f.WritableFile.Close(); err == nil {
		err = cerr
	}
	return err
}

// raft-wal v0.4's segment format (segment/format.go), as far as
// sealsSegment reads it: a 32-byte file header at offset 0, then frames of
// an 8-byte header (type, 3 reserved bytes, little-endian payload length,
// or the CRC for a commit frame, which has no payload) and the payload
// padded to 8 bytes. Every write starts at a frame boundary (the writer
// flushes whole frames). TestLazySyncSealIsDurable checks this against the
// real writer.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

// sealsSegment reports whether p, written at off, holds an index frame:
// raft-wal writes one only when it seals the segment.
func sealsSegment(p []byte, off int64) bool {
	i := 0
	if off == 0 {
		i = walFileHeaderLen
	}
	for i+walFrameHeaderLen <= len(p) {
		switch p[i] {
		case walFrameIndex:
			return true
		case walFrameCommit:
			i += walFrameHeaderLen
			continue
		case walFrameEntry:
		default:
			// Not a frame: no index frame can be found past it.
			return false
		}
		n := int(binary.LittleEndian.Uint32(p[i+4:]))
		i += walFrameHeaderLen + n + (walFrameHeaderLen-n%walFrameHeaderLen)%walFrameHeaderLen
	}
	return false
}
