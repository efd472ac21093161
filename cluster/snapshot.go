package cluster

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// stateSnapshot is a consistent capture of the state directory: hard
// links (so retention, compaction and atomic rewrites after the capture do
// not touch it) and the size each file had at capture time (so appends
// after it are left out).
type stateSnapshot struct {
	dir   string // the staging directory of links
	files []snapFile
	// index is the FSM's lastApplied at capture (see fsm.lastApplied),
	// stored in the snapshot so that a node restored from it knows which
	// commands its state holds.
	index uint64
}

// stateIndexEntry names the snapshot entry holding stateSnapshot.index.
// It is not a state file (none is named so at the top of the state
// directory): restoreState reads it instead of writing it.
const stateIndexEntry = ".regent-state-index"

type snapFile struct {
	rel  string
	size int64
}

var snapSeq atomic.Uint64

// skipInSnapshot names files rebuilt on open and written in place, which a
// hard link cannot freeze: the sparse indexes.
func skipInSnapshot(name string) bool {
	return strings.HasSuffix(name, ".index") || strings.HasSuffix(name, ".timeindex") || strings.HasSuffix(name, ".tmp")
}

func captureState(stateDir, raftDir string) (*stateSnapshot, error) {
	staging := filepath.Join(raftDir, "snapshot-staging", fmt.Sprintf("%d-%d", os.Getpid(), snapSeq.Add(1)))
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
			return os.MkdirAll(filepath.Join(staging, rel), 0o755)
		}
		if !d.Type().IsRegular() || skipInSnapshot(d.Name()) {
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

// Persist implements raft.FSMSnapshot: a tar of the captured files.
func (s *stateSnapshot) Persist(sink raft.SnapshotSink) error {
	err := s.write(sink)
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *stateSnapshot) write(w io.Writer) error {
	tw := tar.NewWriter(w)
	idx := []byte(strconv.FormatUint(s.index, 10))
	if err := tw.WriteHeader(&tar.Header{Name: stateIndexEntry, Mode: 0o644, Size: int64(len(idx)), Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("snapshot state index: %w", err)
	}
	if _, err := tw.Write(idx); err != nil {
		return fmt.Errorf("snapshot state index: %w", err)
	}
	for _, f := range s.files {
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(f.rel), Mode: 0o644, Size: f.size, Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("snapshot %s: %w", f.rel, err)
		}
		fh, err := os.Open(filepath.Join(s.dir, f.rel))
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", f.rel, err)
		}
		_, err = io.CopyN(tw, fh, f.size)
		fh.Close()
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", f.rel, err)
		}
	}
	return tw.Close()
}

// Release implements raft.FSMSnapshot.
func (s *stateSnapshot) Release() { _ = os.RemoveAll(s.dir) }

// readStateIndex reads a snapshot's first entry, the state index it
// recorded; ok is false for a snapshot from before it was recorded (or
// one that cannot be read, which the restore then reports).
func readStateIndex(tr *tar.Reader) (index uint64, ok bool) {
	h, err := tr.Next()
	if err != nil || h.Name != stateIndexEntry {
		return 0, false
	}
	raw, err := io.ReadAll(io.LimitReader(tr, 32))
	if err != nil {
		return 0, false
	}
	index, err = strconv.ParseUint(string(raw), 10, 64)
	return index, err == nil
}

// restoreState replaces stateDir's contents with a snapshot's and returns
// the state index the snapshot was taken at (0 in snapshots from before
// it was recorded).
func restoreState(r io.Reader, stateDir string) (index uint64, err error) {
	if err := os.RemoveAll(stateDir); err != nil {
		return 0, fmt.Errorf("clear state dir: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return 0, fmt.Errorf("create state dir: %w", err)
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return index, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read snapshot: %w", err)
		}
		if h.Name == stateIndexEntry {
			raw, err := io.ReadAll(io.LimitReader(tr, 32))
			if err == nil {
				index, err = strconv.ParseUint(string(raw), 10, 64)
			}
			if err != nil {
				return 0, fmt.Errorf("snapshot state index: %w", err)
			}
			continue
		}
		rel := filepath.FromSlash(h.Name)
		if !filepath.IsLocal(rel) {
			return 0, fmt.Errorf("snapshot entry %q escapes the state directory", h.Name)
		}
		path := filepath.Join(stateDir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return 0, fmt.Errorf("restore %s: %w", rel, err)
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return 0, fmt.Errorf("restore %s: %w", rel, err)
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, fmt.Errorf("restore %s: %w", rel, err)
		}
	}
}
