package group

// Pending member ids (KIP-394) expire in deadline order. Every modern
// client's first JoinGroup leaves one, so a client retrying joins without
// an id, or many new clients at once, can hold tens of thousands; a scan
// of them all at every step made each join cost O(pending). The queue
// keeps their deadlines in a min-heap: adding is O(log n), the next
// deadline O(1), and an id that joined or left before its deadline is
// dropped lazily when it reaches the top (its deadline in g.pending no
// longer matches, or it is gone). So that ids handed out and withdrawn at
// once (a JoinGroup, then a LeaveGroup of its id, in a loop) cannot grow
// the queue past what the budget counts, it is rebuilt from g.pending
// when stale entries outnumber live ones.
//
// Pending ids cost state until their session timeout (up to
// group.max.session.timeout.ms, 30 minutes), and a client can ask for them
// as fast as it can send JoinGroup: a node-wide PendingBudget bounds them.
// At the bound a group hands out a new id in place of its own oldest
// pending one (that client, if it comes back, is told UNKNOWN_MEMBER_ID
// and joins again); a group holding none refuses the join with
// COORDINATOR_NOT_AVAILABLE, which clients retry.

import (
	"container/heap"
	"sync/atomic"
	"time"
)

// DefaultMaxPendingIDs bounds a node's pending member ids: about 200 B
// each, 20 MB in all. Joining clients hold one only for the round trip of
// their second JoinGroup, so this is far above what real clients need.
const DefaultMaxPendingIDs = 100_000

// PendingBudget counts the pending member ids of every group of a
// manager against a limit. Safe for concurrent use (each group's actor
// takes and releases its own).
type PendingBudget struct {
	held  atomic.Int64
	limit int64
}

// NewPendingBudget bounds pending ids at limit (at least 1).
func NewPendingBudget(limit int) *PendingBudget {
	return &PendingBudget{limit: int64(max(limit, 1))}
}

func (b *PendingBudget) take() bool {
	if b == nil {
		return true
	}
	if b.held.Add(1) > b.limit {
		b.held.Add(-1)
		return false
	}
	return true
}

func (b *PendingBudget) release(n int) {
	if b != nil && n > 0 {
		b.held.Add(-int64(n))
	}
}

// Held is the pending ids held now and the bound (0, 0: no budget).
func (b *PendingBudget) Held() (held, limit int64) {
	if b == nil {
		return 0, 0
	}
	return b.held.Load(), b.limit
}

// reset forgets every id held: a new activation's groups hold none.
func (b *PendingBudget) reset() {
	if b != nil {
		b.held.Store(0)
	}
}

type pendingEntry struct {
	at time.Time
	id string
}

// pendingQueue is a min-heap of pending ids by deadline (container/heap).
type pendingQueue []pendingEntry

func (q pendingQueue) Len() int           { return len(q) }
func (q pendingQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q pendingQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *pendingQueue) Push(x any)        { *q = append(*q, x.(pendingEntry)) }
func (q *pendingQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// addPending hands out id until at; false: the node's pending budget is
// spent and this group holds none to give up.
func (g *Group) addPending(id string, at time.Time) bool {
	budget := g.cfg.Pending
	if !budget.take() {
		oldest, ok := g.nextPending()
		if !ok {
			return false
		}
		// The id takes the oldest one's place in the budget.
		heap.Pop(&g.pendingQ)
		delete(g.pending, oldest.id)
	}
	if g.pending == nil {
		g.pending = map[string]time.Time{}
	}
	g.pending[id] = at
	heap.Push(&g.pendingQ, pendingEntry{at: at, id: id})
	return true
}

// dropPending forgets a pending id (it joined, left or expired).
func (g *Group) dropPending(id string) {
	if _, ok := g.pending[id]; !ok {
		return
	}
	delete(g.pending, id)
	g.cfg.Pending.release(1)
	if len(g.pendingQ) > 2*len(g.pending)+64 {
		g.rebuildPendingQ()
	}
}

// rebuildPendingQ drops the queue's stale entries: O(pending), run when
// they outnumber the live ones, so amortized O(1) per id.
func (g *Group) rebuildPendingQ() {
	q := make(pendingQueue, 0, len(g.pending))
	for id, at := range g.pending {
		q = append(q, pendingEntry{at: at, id: id})
	}
	heap.Init(&q)
	g.pendingQ = q
}

// releasePending gives back every pending id of a group whose state is
// being discarded (its actor stopped).
func (g *Group) releasePending() {
	g.cfg.Pending.release(len(g.pending))
	g.pending, g.pendingQ = nil, nil
}

// nextPending is the earliest live pending deadline (zero: none), after
// dropping queue entries whose id is no longer pending at that deadline.
func (g *Group) nextPending() (pendingEntry, bool) {
	for len(g.pendingQ) > 0 {
		top := g.pendingQ[0]
		if at, ok := g.pending[top.id]; ok && at.Equal(top.at) {
			return top, true
		}
		heap.Pop(&g.pendingQ)
	}
	if len(g.pending) == 0 {
		g.pendingQ = nil // let a flood's backing array go
	}
	return pendingEntry{}, false
}

// expireDuePending expires the pending ids due at now, earliest first,
// and reports whether any was.
func (g *Group) expireDuePending(now time.Time) bool {
	progressed := false
	for {
		top, ok := g.nextPending()
		if !ok || now.Before(top.at) {
			return progressed
		}
		heap.Pop(&g.pendingQ)
		g.expirePending(top.id, now)
		progressed = true
	}
}
