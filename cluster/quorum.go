package cluster

// The leader's view of each voter's replication progress, for
// DescribeQuorum and for an ISR by lag (Kafka's replica.lag.time.max.ms).
// hashicorp/raft keeps its followers' match index to itself, so the
// transport raft is given (trackingTransport) watches the AppendEntries it
// carries: each request sent marks the leader's last index at that time,
// and each successful answer says how much of the leader's log the
// follower holds. A follower "caught up at t" holds everything the leader
// held at t: the latest mark at or below what it was seen to hold. This is
// Kafka's lastCaughtUpTime, and, as there, it is learned only from
// answers, so a follower that stops answering stops catching up.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultReplicaLagMax is Kafka's replica.lag.time.max.ms default: a
// voter the leader has not seen caught up for longer leaves the ISR.
const DefaultReplicaLagMax = 30 * time.Second

// VoterProgress is one voter's replication progress as the leader saw it.
type VoterProgress struct {
	ID int32
	// LogEndIndex is the last raft index the voter is known to hold as
	// the leader does (0: unknown).
	LogEndIndex uint64
	// LastFetch is when the leader last had a successful answer from the
	// voter; LastCaughtUp the latest time t such that the voter holds
	// everything the leader held at t. Zero: never, this term.
	LastFetch, LastCaughtUp time.Time
}

// QuorumState is the raft quorum as this node sees it.
type QuorumState struct {
	LeaderID    int32 // -1 while none is known
	Term        uint64
	CommitIndex uint64
	// Leader: this node leads Term, and Voters carry the progress it
	// tracked (its own entry: its last index, times now). On a follower
	// Voters carry only their ids.
	Leader bool
	// LeaderSince is when this node began replicating as leader of Term
	// (zero on a follower).
	LeaderSince time.Time
	Voters      []VoterProgress
}

// Quorum reports the voters' replication progress (a round trip to raft's
// goroutine for the configuration: not for every request).
func (r *Raft) Quorum() QuorumState { return r.QuorumOf(r.Voters()) }

// QuorumOf is Quorum for the given voters, for callers that keep the
// configuration themselves.
func (r *Raft) QuorumOf(voters []int32) QuorumState {
	now := r.progress.now()
	term := r.raft.CurrentTerm()
	q := QuorumState{LeaderID: r.Leader(), Term: term, CommitIndex: r.raft.CommitIndex(), Leader: r.raft.State() == raft.Leader}
	var tracked map[int32]peerSnapshot
	if q.Leader {
		var ok bool
		if q.LeaderSince, tracked, ok = r.progress.snapshot(term); !ok {
			// Elected, nothing sent yet.
			q.LeaderSince = now
		}
	}
	last := r.raft.LastIndex()
	for _, id := range voters {
		vp := VoterProgress{ID: id}
		switch {
		case !q.Leader:
		case id == r.o.Self.ID:
			vp.LogEndIndex, vp.LastFetch, vp.LastCaughtUp = last, now, now
		default:
			p := tracked[id]
			vp.LogEndIndex, vp.LastFetch, vp.LastCaughtUp = p.end, p.lastFetch, p.caughtUp
		}
		q.Voters = append(q.Voters, vp)
	}
	return q
}

// Lagging lists, on the leader, the voters of voters it has not seen
// caught up within RaftOptions.ReplicaLagMax; nil on a follower, which
// tracks nothing. A voter counts as caught up at the term's start: for
// the first ReplicaLagMax of a term, before its followers had the time to
// show they keep up, the new leader keeps them all, as Kafka's new leader
// keeps the ISR it inherits.
func (r *Raft) Lagging(voters []int32) map[int32]bool {
	return r.QuorumOf(voters).lagging(r.o.Self.ID, r.progress.now(), r.o.ReplicaLagMax)
}

// lagging is Lagging's rule for q as seen by node self at now.
func (q QuorumState) lagging(self int32, now time.Time, lagMax time.Duration) map[int32]bool {
	if !q.Leader {
		return nil
	}
	if lagMax <= 0 {
		lagMax = DefaultReplicaLagMax
	}
	var out map[int32]bool
	for _, v := range q.Voters {
		if v.ID == self {
			continue
		}
		if at := later(v.LastCaughtUp, q.LeaderSince); now.Sub(at) > lagMax {
			if out == nil {
				out = map[int32]bool{}
			}
			out[v.ID] = true
		}
	}
	return out
}

// maxProgressMarks bounds the marks kept per voter. Sends outrun answers
// by the requests in flight (raft's pipeline holds two) and a heartbeat
// or two, so this is reached only by a voter that stopped answering.
const maxProgressMarks = 64

// progressTracker is the leader's record of its voters' progress, fed by
// trackingTransport from raft's replication and heartbeat goroutines.
type progressTracker struct {
	now func() time.Time
	// lastIndex is the leader's last log index (raft.LastIndex). Nil
	// until raft exists: nothing is tracked before.
	lastIndex atomic.Pointer[func() uint64]

	// mu guards the records; held briefly by any sending or answering
	// goroutine and by readers.
	mu struct {
		sync.Mutex
		term  uint64    // the leader term the records belong to
		since time.Time // when the first request of term was sent
		peers map[int32]*peerProgress
	}
}

// peerProgress is one follower's record in a term.
//
// Invariant: marks ascend strictly in last and weakly in at.
type peerProgress struct {
	end                 uint64 // highest index proven to match the leader's log (0: unknown)
	lastFetch, caughtUp time.Time
	marks               []progressMark // the leader's last index at sends not yet covered by end
}

// progressMark: at time at, the leader's log ended at last.
type progressMark struct {
	at   time.Time
	last uint64
}

type peerSnapshot struct {
	end                 uint64
	lastFetch, caughtUp time.Time
}

func newProgressTracker(now func() time.Time) *progressTracker {
	t := &progressTracker{now: now}
	t.mu.peers = map[int32]*peerProgress{}
	return t
}

// setLastIndex gives the tracker the leader's last log index, once raft
// exists.
func (t *progressTracker) setLastIndex(f func() uint64) { t.lastIndex.Store(&f) }

// peerLocked returns id's record for a request of term, starting a fresh
// set of records at a new term; nil for a request of an older term.
// Under t.mu.
func (t *progressTracker) peerLocked(term uint64, id int32, create bool) *peerProgress {
	switch {
	case term < t.mu.term:
		return nil
	case term > t.mu.term:
		t.mu.term, t.mu.since = term, t.now()
		t.mu.peers = map[int32]*peerProgress{}
	}
	p := t.mu.peers[id]
	if p == nil && create {
		p = &peerProgress{}
		t.mu.peers[id] = p
	}
	return p
}

// sent records that an AppendEntries (or heartbeat) of req.Term is being
// sent to id now.
func (t *progressTracker) sent(id int32, req *raft.AppendEntriesRequest) {
	li := t.lastIndex.Load()
	if li == nil || id < 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peerLocked(req.Term, id, true)
	if p == nil {
		return
	}
	// Both read under mu, so marks ascend in both. A mark the follower
	// is known to hold already still waits for an answer: only that
	// shows the follower is there to hold it.
	m := progressMark{at: t.now(), last: (*li)()}
	switch n := len(p.marks); {
	case n > 0 && p.marks[n-1].last >= m.last:
		// The leader's log has not grown since the last mark (it never
		// shrinks within a term): the later time is the stronger claim.
		p.marks[n-1].at = m.at
	case n == maxProgressMarks:
		// Conservative: the replaced mark's claim is lost, the newer
		// one is kept.
		p.marks[n-1] = m
	default:
		p.marks = append(p.marks, m)
	}
}

// answered records id's answer to req.
func (t *progressTracker) answered(id int32, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if id < 0 || resp.Term > req.Term {
		return // the leader is being deposed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if req.Term != t.mu.term {
		return
	}
	p := t.peerLocked(req.Term, id, true)
	heartbeat := len(req.Entries) == 0 && req.PrevLogEntry == 0
	if !resp.Success {
		// The follower's log does not match at PrevLogEntry: it holds
		// at most what it says it holds, and less than PrevLogEntry.
		if !heartbeat {
			p.end = min(p.end, resp.LastLog)
			if req.PrevLogEntry > 0 {
				p.end = min(p.end, req.PrevLogEntry-1)
			}
		}
		return
	}
	p.lastFetch = t.now()
	var held uint64
	if heartbeat {
		// A heartbeat checks no log: its LastLog may hold entries of an
		// older term that do not match. What it proves is that the
		// follower is there and still holds as much as before (a node
		// restarted with its data lost says less).
		held = min(p.end, resp.LastLog)
	} else {
		// Success means the log matches through the last entry sent.
		held = req.PrevLogEntry
		if n := len(req.Entries); n > 0 {
			held = req.Entries[n-1].Index
		}
		p.end = max(p.end, held)
	}
	i := 0
	for i < len(p.marks) && p.marks[i].last <= held {
		p.caughtUp = later(p.caughtUp, p.marks[i].at)
		i++
	}
	p.marks = p.marks[:copy(p.marks, p.marks[i:])]
}

// snapshot copies the records of term; ok is false when the tracker has
// none of it (nothing sent in it yet).
func (t *progressTracker) snapshot(term uint64) (since time.Time, peers map[int32]peerSnapshot, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.term != term {
		return time.Time{}, nil, false
	}
	peers = make(map[int32]peerSnapshot, len(t.mu.peers))
	for id, p := range t.mu.peers {
		peers[id] = peerSnapshot{end: p.end, lastFetch: p.lastFetch, caughtUp: p.caughtUp}
	}
	return t.mu.since, peers, true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// trackingTransport is raft's transport with its AppendEntries watched by
// a progressTracker. Everything else, including the optional interfaces
// raft looks for (WithClose, WithPreVote), is the embedded transport's.
type trackingTransport struct {
	*raft.NetworkTransport
	progress *progressTracker
}

var (
	_ raft.Transport   = (*trackingTransport)(nil)
	_ raft.WithClose   = (*trackingTransport)(nil)
	_ raft.WithPreVote = (*trackingTransport)(nil)
)

// AppendEntries carries replication's synchronous requests and every
// heartbeat.
func (t *trackingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	peer := parseServerID(id)
	t.progress.sent(peer, args)
	if err := t.NetworkTransport.AppendEntries(id, target, args, resp); err != nil {
		return err
	}
	t.progress.answered(peer, args, resp)
	return nil
}

// AppendEntriesPipeline wraps the pipeline so that its answers are
// recorded on their way to raft.
func (t *trackingTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	in := inner.Consumer()
	p := &trackedPipeline{
		inner: inner, progress: t.progress, peer: parseServerID(id),
		out: make(chan raft.AppendFuture, cap(in)), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go p.relay(in)
	return p, nil
}

// trackedPipeline records each answer of the inner pipeline, on a relay
// goroutine that hands raft the same future afterwards (one channel hop
// per AppendEntries batch).
type trackedPipeline struct {
	inner    raft.AppendPipeline
	progress *progressTracker
	peer     int32
	out      chan raft.AppendFuture
	stop     chan struct{} // closed by Close: the relay returns
	done     chan struct{} // closed when the relay has returned
	once     sync.Once
}

func (p *trackedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.progress.sent(p.peer, args)
	return p.inner.AppendEntries(args, resp)
}

func (p *trackedPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// Close closes the inner pipeline and waits for the relay to return.
func (p *trackedPipeline) Close() error {
	err := p.inner.Close()
	p.once.Do(func() { close(p.stop) })
	<-p.done
	return err
}

func (p *trackedPipeline) relay(in <-chan raft.AppendFuture) {
	defer close(p.done)
	for {
		select {
		case f := <-in:
			// Futures come out of the inner pipeline answered.
			if f.Error() == nil {
				p.progress.answered(p.peer, f.Request(), f.Response())
			}
			select {
			case p.out <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}
