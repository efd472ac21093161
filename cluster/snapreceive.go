package cluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// transferCounters count what installs received and what this node
// served (any goroutine).
type transferCounters struct {
	installs     atomic.Int64
	linkedFiles  atomic.Int64
	linkedBytes  atomic.Int64
	copiedBytes  atomic.Int64
	pulledFiles  atomic.Int64
	pulledBytes  atomic.Int64
	installBytes atomic.Int64
}

// SnapshotTransfers says what snapshot installs moved on this node since
// it started.
type SnapshotTransfers struct {
	// Installs counts snapshots received whose files were pulled
	// (RGNSNAP2 streams), DataBytes the file bytes they named.
	Installs  int64 `json:"installs"`
	DataBytes int64 `json:"data_bytes"`
	// LinkedFiles/LinkedBytes were already held whole here (hard-linked);
	// CopiedBytes were held as a prefix of a file and copied locally.
	LinkedFiles int64 `json:"linked_files"`
	LinkedBytes int64 `json:"linked_bytes"`
	CopiedBytes int64 `json:"copied_bytes"`
	// PulledFiles/PulledBytes came from the leader.
	PulledFiles int64 `json:"pulled_files"`
	PulledBytes int64 `json:"pulled_bytes"`
	// ServedBytes were sent to followers pulling from this node.
	ServedBytes int64 `json:"served_bytes"`
}

// SnapshotTransfers reports the snapshot bytes this node received and
// served.
func (r *Raft) SnapshotTransfers() SnapshotTransfers { return r.snaps.transfers() }

func (s *snapStore) transfers() SnapshotTransfers {
	t := SnapshotTransfers{
		Installs: s.stats.installs.Load(), DataBytes: s.stats.installBytes.Load(),
		LinkedFiles: s.stats.linkedFiles.Load(), LinkedBytes: s.stats.linkedBytes.Load(), CopiedBytes: s.stats.copiedBytes.Load(),
		PulledFiles: s.stats.pulledFiles.Load(), PulledBytes: s.stats.pulledBytes.Load(),
	}
	if s.server != nil {
		t.ServedBytes = s.server.served.Load()
	}
	return t
}

// setFetch makes the store stream RGNSNAP2 (files pulled by the follower)
// and serve fetches: self is this node's advertised raft address, dial
// opens a fetch connection to a peer. Called before raft starts.
func (s *snapStore) setFetch(self, stateDir string, dial func(addr string, timeout time.Duration) (net.Conn, error)) {
	s.self, s.stateDir, s.dialFetch = self, stateDir, dial
	s.server = &fetchServer{store: s, log: s.log}
}

// newRaftTransport is the raft transport on o.Self.Raft: plain TCP
// (authenticated by o.LinkSecrets when set), or mutual TLS when o.TLS is
// set, below a muxStream that also serves this
// node's snapshot files to followers (and lets snaps pull from peers).
// It is group 0 of a port of its own (a shared one: RaftPort.transport).
func newRaftTransport(o RaftOptions, adv net.Addr, snaps *snapStore, log *slog.Logger, hlog hclog.Logger) (*raft.NetworkTransport, error) {
	inner, err := newPortStream(o.Self.Raft, adv, o.TLS, o.DialTLS, o.LinkSecrets, log)
	if err != nil {
		return nil, err
	}
	snaps.setFetch(o.Self.Raft, o.StateDir, nil)
	return newGroupTransport(newMuxStream(inner, log, snaps.server.serve), snaps, hlog), nil
}

// newGroupTransport is a raft group's transport on mux, whose fetch
// server is snaps's; snaps pulls through mux from peers' same group.
// Each group has its own connection pool.
func newGroupTransport(mux *muxStream, snaps *snapStore, hlog hclog.Logger) *raft.NetworkTransport {
	snaps.dialFetch = mux.dialFetch
	// MaxRPCsInFlight stays raft's 2: a follower stores one AppendEntries
	// at a time (one fsync each), so more in flight only queue there; 8
	// measured no different (1 KiB acks=all produce, 3 alternating runs on
	// the loaded VM: 19, 36, 32 MB/s with 2, 26, 30, 29 with 8).
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: mux, MaxPool: 4, Timeout: raftIOTimeout, Logger: hlog})
	// Followers pull a snapshot's files inside the InstallSnapshot RPC:
	// its deadline follows the data, through the pad (installDeadline).
	trans.TimeoutScale = snapTimeoutScale
	return trans
}

// receiveFiles fills the sink's files directory for the manifest a
// RGNSNAP2 stream brought: each file is linked from this node's state
// directory or an earlier snapshot when one there has the same bytes
// (SHA-256 compared with the leader's), its prefix copied when a local
// file holds the start of it (an active segment the leader appended to
// since), and the rest pulled from the leader. It runs in Close, inside
// raft's InstallSnapshot, and gives up at installBudget. On error the
// sink's directory, with whatever was received, is removed (discard).
func (k *snapSink) receiveFiles() error {
	s, m := k.store, k.m
	if s.dialFetch == nil {
		return errors.New("the snapshot's files must be pulled, and this node has no fetch path")
	}
	start := time.Now()
	budget := installBudget(k.size)
	fc := &fetchClient{addr: m.Source, id: m.ID, dial: s.dialFetch, deadline: k.created.Add(budget), budget: budget}
	defer fc.close()
	// Where this node may already hold a file: its state directory, then
	// its snapshots, newest first.
	var dirs []string
	if s.stateDir != "" {
		dirs = append(dirs, s.stateDir)
	}
	s.mu.Lock()
	metas, err := s.listLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for _, meta := range metas {
		dirs = append(dirs, s.filesDir(meta.ID))
	}
	var st struct {
		linkedFiles, pulledFiles      int
		linked, copied, pulled, total int64
		verify, pull                  time.Duration
	}
	files := filepath.Join(k.tmp, snapFilesDir)
	for _, f := range m.Files {
		st.total += f.Size
		dst := filepath.Join(files, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("received snapshot: %w", err)
		}
		t0 := time.Now()
		have, linked, err := k.reuse(fc, f, dst, dirs)
		st.verify += time.Since(t0)
		if err != nil {
			return err
		}
		s.log.Debug("snapshot file held here", "path", f.Path, "size", f.Size, "held", have, "linked", linked)
		switch {
		case linked:
			st.linkedFiles++
			st.linked += have
			continue
		case have > 0:
			st.copied += have
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("received snapshot: %w", err)
		}
		if have < f.Size {
			before, t0 := fc.pulled, time.Now()
			err = fc.pull(f.Path, have, f.Size, out)
			st.pulled += fc.pulled - before
			st.pulledFiles++
			st.pull += time.Since(t0)
		}
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("received snapshot: %w", cerr)
		}
		if err != nil {
			return err
		}
	}
	took := time.Since(start)
	s.stats.installs.Add(1)
	s.stats.installBytes.Add(st.total)
	s.stats.linkedFiles.Add(int64(st.linkedFiles))
	s.stats.linkedBytes.Add(st.linked)
	s.stats.copiedBytes.Add(st.copied)
	s.stats.pulledFiles.Add(int64(st.pulledFiles))
	s.stats.pulledBytes.Add(st.pulled)
	s.log.Info("snapshot files received", "snapshot", m.ID, "from", m.Source, "files", len(m.Files), "data_bytes", st.total,
		"linked_files", st.linkedFiles, "linked_bytes", st.linked, "copied_bytes", st.copied,
		"pulled_files", st.pulledFiles, "pulled_bytes", st.pulled, "reconnects", fc.reconnects,
		"took", took.Round(time.Millisecond), "verify_and_copy", st.verify.Round(time.Millisecond), "pull", st.pull.Round(time.Millisecond),
		"pull_mib_per_s", mibPerSec(st.pulled, st.pull))
	return nil
}

func mibPerSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(int64(float64(n)/(1<<20)/d.Seconds()*10)) / 10
}

// reuse puts into dst what this node already holds of f: the whole file,
// linked (linked true), or a prefix copied (have bytes), or nothing. A
// local file counts only if its bytes [0, n) hash as the leader's: a
// file of the same name and size from another history (a torn write, an
// earlier compaction, a deleted topic's) is pulled, never taken for the
// leader's.
func (k *snapSink) reuse(fc *fetchClient, f manifestFile, dst string, dirs []string) (have int64, linked bool, err error) {
	if f.Size == 0 {
		return 0, false, nil
	}
	var tried []fs.FileInfo
	for _, dir := range dirs {
		src := filepath.Join(dir, filepath.FromSlash(f.Path))
		fh, err := os.Open(src)
		if err != nil {
			continue
		}
		n, same, err := k.matches(fc, f, fh, &tried)
		if err != nil || !same {
			_ = fh.Close()
			if err != nil {
				return 0, false, err
			}
			continue
		}
		have, linked, err = placeLocal(fh, src, dst, n, f.Size)
		_ = fh.Close()
		return have, linked, err
	}
	return 0, false, nil
}

// matches says whether fh's first n bytes (n = min(its size, f.Size))
// are the leader's. tried collects the inodes already compared.
func (k *snapSink) matches(fc *fetchClient, f manifestFile, fh *os.File, tried *[]fs.FileInfo) (int64, bool, error) {
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return 0, false, nil
	}
	for _, t := range *tried {
		if os.SameFile(t, fi) {
			return 0, false, nil
		}
	}
	*tried = append(*tried, fi)
	n := min(fi.Size(), f.Size)
	var local [32]byte
	var lerr error
	remote, err := fc.sum(f.Path, n, func() { local, lerr = hashRange(fh, 0, n) })
	if err != nil {
		return 0, false, err
	}
	// A local file shorter than it was a moment ago is not reusable.
	return n, lerr == nil && local == remote, nil
}

// placeLocal puts the verified bytes [0, n) of fh (opened from src) into
// dst: a hard link when they are the whole file (size) and src is still
// that inode, else a copy of the prefix (the inode is shared with the
// running state, which appends to it: the leader's tail must not go into
// it).
func placeLocal(fh *os.File, src, dst string, n, size int64) (int64, bool, error) {
	fi, err := fh.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("received snapshot: %w", err)
	}
	if n == size && fi.Size() == size {
		if err := os.Link(src, dst); err == nil {
			if lfi, err := os.Stat(dst); err == nil && os.SameFile(lfi, fi) {
				return n, true, nil
			}
			// src was replaced between the hash and the link.
			if err := os.Remove(dst); err != nil {
				return 0, false, fmt.Errorf("received snapshot: %w", err)
			}
		}
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, false, fmt.Errorf("received snapshot: %w", err)
	}
	// *os.File to *os.File: copy_file_range on Linux.
	w, err := fh.Seek(0, io.SeekStart)
	if err == nil {
		w, err = io.CopyN(out, fh, n)
	}
	if err == nil && w != n {
		err = fmt.Errorf("copied %d of %d bytes", w, n)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, false, fmt.Errorf("received snapshot: copy local %s: %w", src, err)
	}
	return n, false, nil
}
