package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// stateSnapshot is a consistent capture of the state directory: hard
// links (so retention, compaction and atomic rewrites after the capture do
// not touch it) and the size each file had at capture time (so appends
// after it are left out). Capturing costs O(files), not O(bytes).
//
// Every file kind in the state directory is either append-only (segments,
// the group and transaction logs: a later append grows the shared inode
// past the recorded size, which the snapshot ignores) or rewritten whole
// by writing a new file and renaming it over the old one (checkpoints,
// producer state, topics.json, broker-configs.json, acls.json,
// scram-credentials.json, meta/nodes.json, meta/cluster-id, and the
// group and transaction logs when they compact themselves): the link
// keeps the old inode. The sparse indexes are written in place and are
// left out (storage rebuilds a missing or inconsistent index). The one
// in-place shrink, storage.Log.Truncate, is not used by the broker (raft
// never truncates applied state).
type stateSnapshot struct {
	dir   string // the staging directory of links ("" once a sink adopted it)
	files []snapFile
	dirs  []string // every directory, relative, slash form
	// index is the FSM's lastApplied at capture (see fsm.lastApplied),
	// stored in the manifest so that a node restored from it knows which
	// commands its state holds.
	index uint64
}

type snapFile struct {
	rel  string
	size int64
}

var snapSeq atomic.Uint64

// stagingDirName is the directory, beside the snapshot store's, where
// captures are linked until a sink adopts them.
const stagingDirName = "snapshot-staging"

// skipInSnapshot names files rebuilt on open and written in place, which a
// hard link cannot freeze (the sparse indexes), and temporary files.
func skipInSnapshot(name string) bool {
	return isIndexFile(name) || strings.HasSuffix(name, ".tmp")
}

const (
	segmentSuffix     = ".log"
	indexSuffix       = ".index"
	timeIndexSuffix   = ".timeindex"
	cleanShutdownMark = ".clean-shutdown" // storage's marker: indexes match the log
)

func isIndexFile(name string) bool {
	return strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix)
}

// segmentOfIndex names the segment an index file belongs to.
func segmentOfIndex(rel string) string {
	if s, ok := strings.CutSuffix(rel, timeIndexSuffix); ok {
		return s + segmentSuffix
	}
	return strings.TrimSuffix(rel, indexSuffix) + segmentSuffix
}

// captureState links every state file into a new staging directory under
// raftDir. It runs on the FSM goroutine, between batches.
func captureState(stateDir, raftDir string) (*stateSnapshot, error) {
	staging := filepath.Join(raftDir, stagingDirName, fmt.Sprintf("%d-%d", os.Getpid(), snapSeq.Add(1)))
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot staging: %w", err)
	}
	s := &stateSnapshot{dir: staging}
	err := filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed by retention or a topic deletion meanwhile
			}
			return err
		}
		rel, err := filepath.Rel(stateDir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			s.dirs = append(s.dirs, filepath.ToSlash(rel))
			return os.MkdirAll(filepath.Join(staging, rel), 0o755)
		}
		if !d.Type().IsRegular() || skipInSnapshot(d.Name()) || d.Name() == cleanShutdownMark {
			return nil
		}
		link := filepath.Join(staging, rel)
		if err := os.Link(path, link); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("link %s: %w", rel, err)
		}
		fi, err := os.Stat(link)
		if err != nil {
			return err
		}
		s.files = append(s.files, snapFile{rel: rel, size: fi.Size()})
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(staging)
		return nil, fmt.Errorf("capture state: %w", err)
	}
	return s, nil
}

// Persist implements raft.FSMSnapshot: the sink adopts the links (a
// rename) and writes the manifest; its Close fsyncs the linked files,
// since raft truncates its log once the snapshot is stored. Nothing is
// copied.
func (s *stateSnapshot) Persist(sink raft.SnapshotSink) error {
	k, ok := sink.(*snapSink)
	if !ok {
		_ = sink.Cancel()
		return fmt.Errorf("snapshot sink %T is not a manifest sink", sink)
	}
	if err := k.adopt(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *stateSnapshot) Release() {
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// restoreStats says what a restore changed.
type restoreStats struct {
	kept, truncated, linked, removed int
}

// restoreFromLinks makes stateDir hold exactly the snapshot m, whose files
// are linked in linksDir, without copying bytes: a file that is still the
// snapshot's inode is truncated to its recorded size (dropping appends made
// after the capture); a missing or replaced one is linked back; files and
// directories the snapshot does not name are removed, and so are the
// indexes of segments it touched and the clean-shutdown marker of every
// directory it changed (storage then rebuilds those indexes). It is
// idempotent: a crash during it is repaired by running it again.
//
// A state file and its snapshot link share an inode afterwards: the state
// may append to it (past the recorded size) or replace it by rename, never
// rewrite it in place (see stateSnapshot).
func restoreFromLinks(stateDir, linksDir string, m *manifest) (restoreStats, error) {
	var st restoreStats
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return st, fmt.Errorf("create state dir: %w", err)
	}
	dirs := map[string]bool{".": true}
	for _, d := range m.Dirs {
		rel := filepath.FromSlash(d)
		dirs[rel] = true
		if err := os.MkdirAll(filepath.Join(stateDir, rel), 0o755); err != nil {
			return st, fmt.Errorf("restore dir %s: %w", d, err)
		}
	}
	keep := make(map[string]bool, len(m.Files))
	touched := map[string]bool{} // files changed here: their indexes go
	dirty := map[string]bool{}   // directories with a change: their marker goes
	for _, f := range m.Files {
		rel := filepath.FromSlash(f.Path)
		keep[rel] = true
		dirs[filepath.Dir(rel)] = true
		link := filepath.Join(linksDir, rel)
		lfi, err := os.Stat(link)
		if err != nil {
			return st, fmt.Errorf("snapshot file %s: %w", f.Path, err)
		}
		if lfi.Size() < f.Size {
			return st, fmt.Errorf("snapshot file %s holds %d bytes, its manifest %d: it was cut in place", f.Path, lfi.Size(), f.Size)
		}
		path := filepath.Join(stateDir, rel)
		fi, err := os.Lstat(path)
		switch {
		case err == nil && os.SameFile(fi, lfi):
			if fi.Size() == f.Size {
				st.kept++
				continue
			}
			st.truncated++
		case err == nil:
			// Replaced since the capture (a rename over it), or not a
			// regular file: the snapshot's inode comes back.
			if err := os.RemoveAll(path); err != nil {
				return st, fmt.Errorf("restore %s: %w", f.Path, err)
			}
			fallthrough
		case errors.Is(err, fs.ErrNotExist):
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return st, fmt.Errorf("restore %s: %w", f.Path, err)
			}
			if err := os.Link(link, path); err != nil {
				return st, fmt.Errorf("restore %s: %w", f.Path, err)
			}
			st.linked++
		default:
			return st, fmt.Errorf("restore %s: %w", f.Path, err)
		}
		if lfi.Size() > f.Size {
			// Appends made after the capture, in the shared inode.
			if err := os.Truncate(path, f.Size); err != nil {
				return st, fmt.Errorf("restore %s: %w", f.Path, err)
			}
		}
		touched[rel] = true
		dirty[filepath.Dir(rel)] = true
	}
	// What the snapshot does not hold goes. Directories first (whole
	// subtrees), then files, then markers of directories that changed.
	var extra []string
	err := filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(stateDir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if !dirs[rel] {
				extra = append(extra, rel)
				dirty[filepath.Dir(rel)] = true
				return filepath.SkipDir
			}
			return nil
		}
		if keep[rel] || d.Name() == cleanShutdownMark {
			return nil
		}
		if isIndexFile(d.Name()) {
			if seg := segmentOfIndex(rel); keep[seg] && !touched[seg] {
				return nil
			}
		}
		extra = append(extra, rel)
		if !isIndexFile(d.Name()) {
			dirty[filepath.Dir(rel)] = true
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("scan state dir: %w", err)
	}
	for _, rel := range extra {
		if err := os.RemoveAll(filepath.Join(stateDir, rel)); err != nil {
			return st, fmt.Errorf("remove %s: %w", rel, err)
		}
		st.removed++
	}
	for d := range dirty {
		if err := os.Remove(filepath.Join(stateDir, d, cleanShutdownMark)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return st, fmt.Errorf("remove %s marker: %w", d, err)
		}
	}
	return st, nil
}
