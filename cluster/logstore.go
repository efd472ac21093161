package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// logStore is what raft.NewRaft needs from the node's raft log: the log
// itself and the stable store (current term, last vote), both durable
// before a call returns, closed at shutdown.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// Names inside the raft directory.
const (
	// walDirName holds raft-wal's segment files and its meta database.
	walDirName = "wal"
	// boltFileName is the raft-boltdb store earlier versions kept the
	// log in.
	boltFileName = "raft.db"
)

// openLogStore opens the node's raft log and stable store under dir (the
// raft directory); io, if not nil, counts its segment writes and fsyncs.
//
// The log is raft-wal: it appends with one fsync instead of bolt's two
// and truncates the head by deleting whole 64 MiB segment files. Measured
// with logstore_bench_test.go on the 2-core VM (2026-12-03, shared with
// other work, load average about 3), StoreLogs MB/s wal/bolt: 29.9/19.6
// (256 B entries, 64 per call), 400/256 (64 KiB x16), 544/247 (1 MiB x4);
// appending with head deletes 491/219 (a 256-entry DeleteRange 4.6 ms
// against 1.8 ms). A 3-node raft cluster on loopback committing 256 KiB
// entries (BenchmarkLogStoreRaft3) does not tell them apart on this shared
// machine: wal 69, 161, 165, 64 MB/s, bolt 49, 192, 106, 155 over four
// runs each. Raft's own CPU (encoding, the transport) and the machine's
// load set that figure, not the store.
//
// A raft directory from an earlier version holds raft.db and no wal: its
// entries and votes are copied into a new wal once, then raft.db is
// renamed raft.db.migrated (kept for inspection; the node no longer reads
// it). The copy is made in wal.tmp and renamed into place only when
// complete, so a crash during it leaves raft.db in charge and the next
// start copies again.
func openLogStore(dir string, io *walIOStats) (logStore, error) {
	walDir := filepath.Join(dir, walDirName)
	bolt := filepath.Join(dir, boltFileName)
	if _, err := os.Stat(walDir); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(bolt); err == nil {
			if err := migrateBoltToWAL(bolt, walDir); err != nil {
				return nil, fmt.Errorf("migrate %s to %s (remove %s to start this node with an empty raft log, then let the leader catch it up): %w", bolt, walDir, bolt, err)
			}
		}
	}
	return openWALStore(walDir, io)
}

// openWALStore opens (or creates) a raft-wal in dir; raft-wal needs the
// directory to exist. Its segment files are written with O_DIRECT
// (directVFS). io, if not nil, times its segment writes and fsyncs. Close closes its meta database too (since v0.4.1;
// v0.4.0 left it open and locked, so a node reopened in the same process
// blocked forever).
func openWALStore(dir string, io *walIOStats) (*raftwal.WAL, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create raft wal dir: %w", err)
	}
	var w *raftwal.WAL
	var err error
	var vfs types.VFS = newDirectVFS()
	if io != nil {
		vfs = newTimedVFS(io)
	}
	w, err = raftwal.Open(dir, raftwal.WithSegmentFiler(segment.NewFiler(dir, vfs)))
	if err != nil {
		return nil, fmt.Errorf("open raft wal %s: %w", dir, err)
	}
	return w, nil
}

// openBoltStore opens a raft-boltdb store at path (migration and the
// benchmark's comparison).
func openBoltStore(path string) (*raftboltdb.BoltStore, error) {
	s, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		return nil, fmt.Errorf("open raft bolt store %s: %w", path, err)
	}
	return s, nil
}

// migrateBoltToWAL copies the bolt store at boltPath into a new wal at
// walDir and retires the bolt file.
func migrateBoltToWAL(boltPath, walDir string) (err error) {
	src, err := openBoltStore(boltPath)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := src.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close bolt store: %w", cerr)
		}
	}()
	tmp := walDir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("clear %s: %w", tmp, err)
	}
	dst, err := openWALStore(tmp, nil)
	if err != nil {
		return err
	}
	err = copyLogs(dst, src)
	if err == nil {
		err = copyStable(dst, src)
	}
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close wal: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("copy raft log: %w", err)
	}
	if err := os.Rename(tmp, walDir); err != nil {
		return fmt.Errorf("install wal: %w", err)
	}
	if err := syncLogStoreDir(filepath.Dir(walDir)); err != nil {
		return err
	}
	// Once the wal is in place it is the log; a crash before the rename
	// below leaves raft.db beside it, unread.
	if err := os.Rename(boltPath, boltPath+".migrated"); err != nil {
		return fmt.Errorf("retire %s: %w", boltPath, err)
	}
	return nil
}

// copyLogs copies every entry of src into the empty dst.
func copyLogs(dst, src raft.LogStore) error {
	last, err := src.LastIndex()
	if err != nil || last == 0 {
		return err // an empty log has nothing to copy
	}
	return migrate.CopyLogs(context.Background(), dst, src, 4<<20, nil)
}

// copyStable copies raft's stable keys. raft writes only these three
// (raft.go's keyCurrentTerm, keyLastVoteTerm, keyLastVoteCand); a node
// that never voted has no vote keys, which is not an error.
func copyStable(dst, src raft.StableStore) error {
	for _, k := range []string{"CurrentTerm", "LastVoteTerm"} {
		v, err := src.GetUint64([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", k, err)
		}
		if err := dst.SetUint64([]byte(k), v); err != nil {
			return fmt.Errorf("write %s: %w", k, err)
		}
	}
	v, err := src.Get([]byte("LastVoteCand"))
	if errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read LastVoteCand: %w", err)
	}
	if err := dst.Set([]byte("LastVoteCand"), v); err != nil {
		return fmt.Errorf("write LastVoteCand: %w", err)
	}
	return nil
}

// logCacheEntries is how many of the latest raft entries the leader keeps
// in memory to send to followers: 4 times the entries in flight.
const logCacheEntries = 4 * maxInflightEntries

// logCacheBytes caps the cache's entry bytes: half of what may be in
// flight with entries of the largest size (a follower further behind is
// sent entries read back from the wal); entries of usual produce size
// (70 KiB) hit the count first.
const logCacheBytes = maxInflightEntries * maxEntryBytes / 2

// commitTimeout is how long the leader's replication to a follower idles
// before it sends an AppendEntries anyway, carrying only the commit index.
// A new entry sends at once, so this bounds only how late a follower
// learns that its last entries committed when nothing follows them. At
// 5 ms it cost an idle 3-node cluster 10% of a core on the leader and 3%
// on each follower (about 130 empty RPCs a second to each follower);
// raft's default of 50 ms costs a tenth of that.
const commitTimeout = 50 * time.Millisecond

// tuneRaftConfig sets raft's throughput knobs (NewRaft and the log store
// benchmark share them, so the benchmark measures what nodes run).
// BatchApplyCh lets the leader hand up to MaxAppendEntries queued entries
// to one StoreLogs (one fsync) and one AppendEntries RPC.
func tuneRaftConfig(cfg *raft.Config) {
	cfg.BatchApplyCh = true
	cfg.MaxAppendEntries = 64
}

// syncLogStoreDir makes renames in dir durable.
func syncLogStoreDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
