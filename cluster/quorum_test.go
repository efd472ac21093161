package cluster

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/interop/testwait"
)

// scriptedTracker is a progressTracker on a clock and a leader log the
// test moves.
type scriptedTracker struct {
	*progressTracker
	at   time.Time
	last uint64
}

func newScriptedTracker() *scriptedTracker {
	s := &scriptedTracker{at: time.Unix(1_700_000_000, 0)}
	s.progressTracker = newProgressTracker(func() time.Time { return s.at })
	s.setLastIndex(func() uint64 { return s.last })
	return s
}

func (s *scriptedTracker) tick(d time.Duration) time.Time { s.at = s.at.Add(d); return s.at }

// appendReq is an AppendEntries of term carrying entries (prev, to].
func appendReq(term, prev, to uint64) *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{Term: term, PrevLogEntry: prev, PrevLogTerm: term}
	for i := prev + 1; i <= to; i++ {
		req.Entries = append(req.Entries, &raft.Log{Index: i, Term: term})
	}
	return req
}

func heartbeatReq(term uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{Term: term}
}

func ok(term, lastLog uint64) *raft.AppendEntriesResponse {
	return &raft.AppendEntriesResponse{Term: term, Success: true, LastLog: lastLog}
}

func (s *scriptedTracker) peer(t *testing.T, term uint64, id int32) peerSnapshot {
	t.Helper()
	_, peers, ok := s.snapshot(term)
	if !ok {
		t.Fatalf("no records of term %d", term)
	}
	return peers[id]
}

// TestProgressTrackerCaughtUp: a follower is caught up at a send's time
// once an answer shows it holds what the leader held then; under steady
// appends (the leader's log grows between sends) it is caught up at an
// earlier send's time, as Kafka's follower is to its previous fetch; an
// idle follower stays caught up through heartbeats; one that stops
// answering does not move.
func TestProgressTrackerCaughtUp(t *testing.T) {
	s := newScriptedTracker()
	const term, f = 3, int32(2)
	s.last = 10
	t0 := s.tick(time.Millisecond)
	req := appendReq(term, 5, 10)
	s.sent(f, req)
	t1 := s.tick(5 * time.Millisecond)
	s.answered(f, req, ok(term, 10))
	if p := s.peer(t, term, f); p.end != 10 || !p.caughtUp.Equal(t0) || !p.lastFetch.Equal(t1) {
		t.Fatalf("after the first answer: %+v, want end 10, caught up at %v, fetched at %v", p, t0, t1)
	}

	// Steady load: each request carries less than the leader holds by
	// the time it leaves.
	s.last = 20
	ta := s.tick(10 * time.Millisecond)
	a := appendReq(term, 10, 15)
	s.sent(f, a)
	s.last = 25
	tb := s.tick(10 * time.Millisecond)
	b := appendReq(term, 15, 20)
	s.sent(f, b)
	s.tick(time.Millisecond)
	s.answered(f, a, ok(term, 15))
	if p := s.peer(t, term, f); p.end != 15 || !p.caughtUp.Equal(t0) {
		t.Fatalf("holding 15 of 20: %+v, want caught up still at %v", p, t0)
	}
	s.answered(f, b, ok(term, 20))
	if p := s.peer(t, term, f); p.end != 20 || !p.caughtUp.Equal(ta) {
		t.Fatalf("holding 20, what the leader held at the first send: %+v, want caught up at %v (not %v)", p, ta, tb)
	}
	c := appendReq(term, 20, 25)
	s.sent(f, c)
	s.answered(f, c, ok(term, 25))
	if p := s.peer(t, term, f); p.end != 25 || !p.caughtUp.Equal(s.at) {
		t.Fatalf("holding all 25: %+v, want caught up at %v", p, s.at)
	}

	// Idle: heartbeats keep it caught up.
	for range 3 {
		th := s.tick(100 * time.Millisecond)
		hb := heartbeatReq(term)
		s.sent(f, hb)
		s.tick(time.Millisecond)
		s.answered(f, hb, ok(term, 25))
		if p := s.peer(t, term, f); !p.caughtUp.Equal(th) || !p.lastFetch.Equal(s.at) {
			t.Fatalf("idle heartbeat at %v: %+v", th, p)
		}
	}

	// It stops answering: requests go out, nothing comes back.
	before := s.peer(t, term, f)
	for range 200 {
		s.last++
		s.tick(50 * time.Millisecond)
		s.sent(f, appendReq(term, 25, s.last))
		s.sent(f, heartbeatReq(term))
	}
	if p := s.peer(t, term, f); p != before {
		t.Fatalf("a silent follower moved: %+v, was %+v", p, before)
	}
	s.mu.Lock()
	marks := len(s.mu.peers[f].marks)
	s.mu.Unlock()
	if marks > maxProgressMarks {
		t.Fatalf("%d marks kept, want at most %d", marks, maxProgressMarks)
	}
	// Back, it catches up to the end: caught up at the last send.
	tend := s.at
	s.answered(f, appendReq(term, 25, s.last), ok(term, s.last))
	if p := s.peer(t, term, f); p.end != s.last || !p.caughtUp.Equal(tend) {
		t.Fatalf("back and caught up: %+v, want end %d at %v", p, s.last, tend)
	}
}

// TestProgressTrackerHeartbeats: a heartbeat checks no log, so it shows
// only that the follower still holds what an AppendEntries proved; its
// LastLog alone (maybe entries of an older term) proves nothing.
func TestProgressTrackerHeartbeats(t *testing.T) {
	s := newScriptedTracker()
	const term, f = 5, int32(3)
	s.last = 40
	hb := heartbeatReq(term)
	s.sent(f, hb)
	s.answered(f, hb, ok(term, 99))
	if p := s.peer(t, term, f); p.end != 0 || !p.caughtUp.IsZero() || p.lastFetch.IsZero() {
		t.Fatalf("heartbeat before any AppendEntries: %+v, want fetched, end unknown, never caught up", p)
	}
	req := appendReq(term, 30, 40)
	s.sent(f, req)
	s.answered(f, req, ok(term, 40))
	caught := s.peer(t, term, f).caughtUp
	// Restarted with its log lost: the heartbeat says less than before.
	s.tick(time.Second)
	s.sent(f, hb)
	s.answered(f, hb, ok(term, 7))
	if p := s.peer(t, term, f); !p.caughtUp.Equal(caught) {
		t.Fatalf("heartbeat of a follower holding 7 of 40: caught up at %v, want still %v", p.caughtUp, caught)
	}
	// Its next AppendEntries is refused: it holds at most 7.
	next := appendReq(term, 40, 40)
	s.sent(f, next)
	s.answered(f, next, &raft.AppendEntriesResponse{Term: term, LastLog: 7})
	if p := s.peer(t, term, f); p.end != 7 {
		t.Fatalf("after a refusal with LastLog 7: end %d, want 7", p.end)
	}
}

// TestProgressTrackerTerms: a new term starts fresh records; answers to
// requests of an older term, and answers from a newer term (the leader
// is deposed), are ignored.
func TestProgressTrackerTerms(t *testing.T) {
	s := newScriptedTracker()
	s.last = 10
	old := appendReq(1, 0, 10)
	s.sent(2, old)
	start := s.tick(time.Second)
	cur := appendReq(2, 10, 10)
	s.sent(3, cur)
	s.answered(2, old, ok(1, 10))
	if _, _, ok := s.snapshot(1); ok {
		t.Fatal("records of term 1 after term 2 began")
	}
	since, peers, ok := s.snapshot(2)
	if !ok || !since.Equal(start) || peers[2] != (peerSnapshot{}) {
		t.Fatalf("term 2: since %v (want %v), %+v: an answer of term 1 counted", since, start, peers)
	}
	s.answered(3, cur, &raft.AppendEntriesResponse{Term: 3, Success: true, LastLog: 10})
	if p := s.peer(t, 2, 3); p != (peerSnapshot{}) {
		t.Fatalf("an answer from term 3 counted: %+v", p)
	}
	// Nothing is tracked before raft exists.
	fresh := newProgressTracker(time.Now)
	fresh.sent(2, appendReq(4, 0, 1))
	if _, _, ok := fresh.snapshot(4); ok {
		t.Fatal("tracked before the leader's last index was known")
	}
}

// TestQuorumLagging: the leader counts out a voter last caught up more
// than the lag ago, keeps itself, keeps every voter for the first lag of
// its term (no record yet, or caught up before the term), and a follower
// counts nobody out.
func TestQuorumLagging(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const lag = 30 * time.Second
	q := QuorumState{LeaderID: 1, Leader: true, LeaderSince: now.Add(-time.Hour), Voters: []VoterProgress{
		{ID: 1, LastCaughtUp: now},
		{ID: 2, LastCaughtUp: now.Add(-lag)},
		{ID: 3, LastCaughtUp: now.Add(-lag - time.Millisecond)},
		{ID: 4},
	}}
	got := q.lagging(1, now, lag)
	if fmt.Sprint(got) != fmt.Sprint(map[int32]bool{3: true, 4: true}) {
		t.Fatalf("lagging %v, want 3 and 4", got)
	}
	q.LeaderSince = now.Add(-lag + time.Second)
	if got := q.lagging(1, now, lag); got != nil {
		t.Fatalf("%v lagging %v into the term, want none", got, lag-time.Second)
	}
	q.LeaderSince = now.Add(-2 * lag)
	if got := q.lagging(1, now, 0); fmt.Sprint(got) != fmt.Sprint(map[int32]bool{3: true, 4: true}) {
		t.Fatalf("default lag: %v", got)
	}
	q.Leader = false
	if got := q.lagging(2, now, lag); got != nil {
		t.Fatalf("a follower counts %v out", got)
	}
}

// fakePipeline is an AppendPipeline whose answers the test hands out.
type fakePipeline struct {
	answers chan raft.AppendFuture
	closed  chan struct{}
	once    sync.Once
}

func (p *fakePipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return &fakeFuture{req: args, resp: resp}, nil
}
func (p *fakePipeline) Consumer() <-chan raft.AppendFuture { return p.answers }
func (p *fakePipeline) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

type fakeFuture struct {
	req  *raft.AppendEntriesRequest
	resp *raft.AppendEntriesResponse
	err  error
}

func (f *fakeFuture) Error() error                                     { return f.err }
func (f *fakeFuture) Start() time.Time                                 { return time.Time{} }
func (f *fakeFuture) Request() *raft.AppendEntriesRequest              { return f.req }
func (f *fakeFuture) Response() *raft.AppendEntriesResponse            { return f.resp }
func (f *fakeFuture) answer(r *raft.AppendEntriesResponse) *fakeFuture { *f.resp = *r; return f }

// TestTrackedPipeline: the wrapped pipeline hands raft the inner
// pipeline's own futures, in order, each recorded first (a failed one
// is not); Close closes the inner pipeline and stops the relay, even one
// holding a future raft never took.
func TestTrackedPipeline(t *testing.T) {
	s := newScriptedTracker()
	s.last = 8
	inner := &fakePipeline{answers: make(chan raft.AppendFuture, 2), closed: make(chan struct{})}
	p := &trackedPipeline{inner: inner, progress: s.progressTracker, peer: 2, out: make(chan raft.AppendFuture, 2), stop: make(chan struct{}), done: make(chan struct{})}
	go p.relay(inner.answers)

	f1, _ := p.AppendEntries(appendReq(1, 0, 4), new(raft.AppendEntriesResponse))
	f2, _ := p.AppendEntries(appendReq(1, 4, 8), new(raft.AppendEntriesResponse))
	for i, want := range []raft.AppendFuture{f1, f2} {
		inner.answers <- want.(*fakeFuture).answer(ok(1, uint64(4*(i+1))))
		got := <-p.Consumer()
		if got != want {
			t.Fatalf("future %d relayed as %v, want the inner one %v", i, got, want)
		}
		// Recorded before raft sees it.
		if end := s.peer(t, 1, 2).end; end != uint64(4*(i+1)) {
			t.Fatalf("after future %d: end %d", i, end)
		}
	}
	failed := &fakeFuture{req: appendReq(1, 8, 9), resp: new(raft.AppendEntriesResponse), err: errors.New("reset")}
	inner.answers <- failed
	if got := <-p.Consumer(); got != failed {
		t.Fatalf("failed future relayed as %v", got)
	}
	if end := s.peer(t, 1, 2).end; end != 8 {
		t.Fatalf("a failed future counted: end %d", end)
	}
	// One more answer raft never takes; then Close.
	inner.answers <- &fakeFuture{req: appendReq(1, 8, 8), resp: ok(1, 8)}
	inner.answers <- &fakeFuture{req: appendReq(1, 8, 8), resp: ok(1, 8)}
	inner.answers <- &fakeFuture{req: appendReq(1, 8, 8), resp: ok(1, 8)}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inner.closed:
	default:
		t.Fatal("the inner pipeline is open after Close")
	}
	select {
	case <-p.done:
	default:
		t.Fatal("the relay runs after Close")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestRaftQuorum: on a 3-node cluster the leader reports every voter at
// its own log end, caught up within moments; a follower reports no
// progress; a follower shut down stops catching up, and with a short
// ReplicaLagMax the leader counts it out while the live one stays in.
func TestRaftQuorum(t *testing.T) {
	base := t.TempDir()
	var peers []Peer
	for i := int32(1); i <= 3; i++ {
		peers = append(peers, Peer{ID: i, Raft: freeAddr(t)})
	}
	const lag = 2 * time.Second
	nodes := make([]*testNode, 3)
	for i, p := range peers {
		nodes[i] = startNode(t, RaftOptions{Self: p, Peers: peers, Dir: filepath.Join(base, fmt.Sprint(p.ID), "raft"), StateDir: filepath.Join(base, fmt.Sprint(p.ID), "state"), ReplicaLagMax: lag}, false)
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				_ = n.r.Shutdown()
			}
		}
	}()
	testwait.For(t, "a leader", 15*time.Second, func() bool { return leaderOf(nodes) != nil })
	l := leaderOf(nodes)
	for v := range uint64(20) {
		if err := propose(t, l, v); err != nil {
			t.Fatal(err)
		}
	}
	var q QuorumState
	testwait.For(t, "every voter at the leader's log end", 10*time.Second, func() bool {
		q = l.r.Quorum()
		if !q.Leader || q.LeaderID != l.opts.Self.ID || len(q.Voters) != 3 || q.CommitIndex == 0 {
			return false
		}
		for _, v := range q.Voters {
			if v.LogEndIndex != l.r.raft.LastIndex() || time.Since(v.LastCaughtUp) > lag || time.Since(v.LastFetch) > lag {
				return false
			}
		}
		return true
	})
	if q.Term != l.r.raft.CurrentTerm() {
		t.Fatalf("term %d, raft's %d", q.Term, l.r.raft.CurrentTerm())
	}
	var down, up *testNode
	for i, n := range nodes {
		if n == l {
			continue
		}
		if fq := n.r.Quorum(); fq.Leader || fq.LeaderID != l.opts.Self.ID || len(fq.Voters) != 3 || fq.Voters[0].LogEndIndex != 0 {
			t.Fatalf("follower %d's quorum: %+v", n.opts.Self.ID, fq)
		}
		if down == nil {
			down = n
			_ = n.r.Shutdown()
			nodes[i] = nil
		} else {
			up = n
		}
	}
	ids := []int32{1, 2, 3}
	testwait.For(t, "the shut-down follower counted out", 15*time.Second, func() bool {
		return l.r.Lagging(ids)[down.opts.Self.ID]
	})
	stopped := func() time.Time {
		for _, v := range l.r.Quorum().Voters {
			if v.ID == down.opts.Self.ID {
				return v.LastCaughtUp
			}
		}
		t.Fatal("the shut-down follower is no longer a voter")
		return time.Time{}
	}()
	for v := range uint64(20) {
		if err := propose(t, l, 100+v); err != nil {
			t.Fatal(err)
		}
	}
	if lagging := l.r.Lagging(ids); lagging[up.opts.Self.ID] || lagging[l.opts.Self.ID] {
		t.Fatalf("lagging %v: the live follower or the leader counted out", lagging)
	}
	for _, v := range l.r.Quorum().Voters {
		if v.ID == down.opts.Self.ID && !v.LastCaughtUp.Equal(stopped) {
			t.Fatalf("the shut-down follower caught up at %v, was %v", v.LastCaughtUp, stopped)
		}
	}
}

// BenchmarkProgressTracker is the tracker's cost per AppendEntries: a
// send and its answer, for one of two followers.
func BenchmarkProgressTracker(b *testing.B) {
	s := newScriptedTracker()
	s.progressTracker.now = time.Now
	reqs := []*raft.AppendEntriesRequest{appendReq(1, 0, 64), heartbeatReq(1)}
	for i := 0; i < b.N; i++ {
		s.last = uint64(i + 64)
		req := reqs[i%2]
		s.sent(int32(2+i%2), req)
		s.answered(int32(2+i%2), req, ok(1, s.last))
	}
}
