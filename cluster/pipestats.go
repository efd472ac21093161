package cluster

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft-wal/types"
)

// pipeStats counts where a proposal's time goes on its way through this
// node, for `regent cluster status`: the wait for the batcher, raft's
// commit plus this node's apply, the FSM's batches, and the raft log's
// writes and fsyncs. Sums and counts only (atomics, any goroutine), so a
// reader takes averages over an interval by subtracting two reads.
type pipeStats struct {
	proposals  atomic.Int64 // proposals handed to raft in an entry
	queuedNs   atomic.Int64 // sum over them of Propose to raft.Apply
	entries    atomic.Int64 // entries this node proposed
	entryBytes atomic.Int64
	// answeredNs sums, over entries, raft.Apply to the answer: commit on a
	// majority (the leader's own fsync, then a follower's) and this
	// node's apply.
	answeredNs atomic.Int64

	applyBatches atomic.Int64 // FSM batches (every node)
	applyEntries atomic.Int64
	applyNs      atomic.Int64 // sum of batch durations, async applies included

	wal walIOStats
}

// walIOStats times the raft log's segment writes and fsyncs.
type walIOStats struct {
	writes, writeBytes, writeNs atomic.Int64
	syncs, syncNs               atomic.Int64
}

// PipelineStats is pipeStats as `regent cluster status` shows it: totals
// since the node started and averages over them.
type PipelineStats struct {
	Proposals         int64   `json:"proposals"`
	Entries           int64   `json:"entries"`
	ProposalsPerEntry float64 `json:"proposals_per_entry"`
	EntryKiB          float64 `json:"entry_kib"`
	// QueuedMs: Propose to raft.Apply; AnsweredMs: raft.Apply to the
	// answer (commit and this node's apply); both averages, leader only.
	QueuedMs   float64 `json:"queued_ms"`
	AnsweredMs float64 `json:"answered_ms"`
	// Applies on every node: batches raft handed the FSM, entries per
	// batch, and a batch's duration with its actors' applies.
	ApplyBatches     int64   `json:"apply_batches"`
	EntriesPerBatch  float64 `json:"entries_per_batch"`
	ApplyBatchMs     float64 `json:"apply_batch_ms"`
	LogWrites        int64   `json:"log_writes"`
	LogWriteKiB      float64 `json:"log_write_kib"`
	LogWriteMs       float64 `json:"log_write_ms"`
	LogSyncs         int64   `json:"log_syncs"`
	LogSyncMs        float64 `json:"log_sync_ms"`
	LogBytesWritten  int64   `json:"log_bytes_written"`
	LogSyncTotalSecs float64 `json:"log_sync_total_s"`
}

func (s *pipeStats) proposed(props []*proposal, bytes int, now time.Time) {
	var q time.Duration
	for _, p := range props {
		q += now.Sub(p.at)
	}
	s.proposals.Add(int64(len(props)))
	s.queuedNs.Add(int64(q))
	s.entries.Add(1)
	s.entryBytes.Add(int64(bytes))
}

func (s *pipeStats) snapshot() PipelineStats {
	avg := func(sum, n int64, unit float64) float64 {
		if n == 0 {
			return 0
		}
		return float64(sum) / float64(n) / unit
	}
	const ms, kib = 1e6, 1024
	p, e := s.proposals.Load(), s.entries.Load()
	b := s.applyBatches.Load()
	w, sy := s.wal.writes.Load(), s.wal.syncs.Load()
	return PipelineStats{
		Proposals:         p,
		Entries:           e,
		ProposalsPerEntry: avg(p, e, 1),
		EntryKiB:          avg(s.entryBytes.Load(), e, kib),
		QueuedMs:          avg(s.queuedNs.Load(), p, ms),
		AnsweredMs:        avg(s.answeredNs.Load(), e, ms),
		ApplyBatches:      b,
		EntriesPerBatch:   avg(s.applyEntries.Load(), b, 1),
		ApplyBatchMs:      avg(s.applyNs.Load(), b, ms),
		LogWrites:         w,
		LogWriteKiB:       avg(s.wal.writeBytes.Load(), w, kib),
		LogWriteMs:        avg(s.wal.writeNs.Load(), w, ms),
		LogSyncs:          sy,
		LogSyncMs:         avg(s.wal.syncNs.Load(), sy, ms),
		LogBytesWritten:   s.wal.writeBytes.Load(),
		LogSyncTotalSecs:  float64(s.wal.syncNs.Load()) / 1e9,
	}
}

// timedVFS is the raft log's file system (directVFS) with its segment writes and fsyncs
// timed into st.
type timedVFS struct {
	types.VFS
	st *walIOStats
}

func newTimedVFS(st *walIOStats) timedVFS { return timedVFS{VFS: newDirectVFS(), st: st} }

func (v timedVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return timedFile{WritableFile: f, st: v.st}, nil
}

func (v timedVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return timedFile{WritableFile: f, st: v.st}, nil
}

type timedFile struct {
	types.WritableFile
	st *walIOStats
}

func (f timedFile) WriteAt(b []byte, off int64) (int, error) {
	t := time.Now()
	n, err := f.WritableFile.WriteAt(b, off)
	f.st.writeNs.Add(int64(time.Since(t)))
	f.st.writes.Add(1)
	f.st.writeBytes.Add(int64(n))
	return n, err
}

func (f timedFile) Sync() error {
	t := time.Now()
	err := f.WritableFile.Sync()
	f.st.syncNs.Add(int64(time.Since(t)))
	f.st.syncs.Add(1)
	return err
}
