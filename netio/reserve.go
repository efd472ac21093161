package netio

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// growFrame is the capacity of a frame buffer of want bytes that holds
// need, grown from cur. A frame's claimed size is not trusted: a buffer
// doubles (at least 64 KiB), so what a connection holds stays under twice
// what it has sent and each byte is copied about once more. It goes
// straight to want, copied no more, when the rest fits room: the share of
// the request budget a client sending at speed may take at once (see
// frameRoom).
func growFrame(cur, need, want, room int) int {
	if want-cur <= room {
		return want
	}
	return min(max(need, 2*cur, 64<<10), want)
}

// fastRead is the bytes of a frame (its length prefix included) a client
// must have sent before the rest may be taken at once. Any client can
// send that much quickly, so this is no proof of good faith; it keeps
// small partial frames small, and frameShare bounds what one that stalls
// afterwards holds.
const fastRead = 64 << 10

// frameShare is the fraction (1/frameShare) of the request budget left
// that a frame may take at once beyond its buffer: a client claiming a
// large frame and then stalling holds at most that more than it sent (and
// is the first closed when others need the budget: it holds the most),
// and the budget's last bytes are taken only as frames arrive. A quarter
// because producers' requests are large: kgo packs up to 1 MB per
// partition, 23 MB frames for 24 partitions, which a sixteenth of the
// default budget (12 MiB) did not take at once: 1.8 bytes allocated per
// byte produced, against 1.0 with a quarter.
const frameShare = 4

// frameRoom is how many bytes beyond its buffer a frame of which arrived
// bytes have come may take at once. On the frame's loop.
func (s *Server) frameRoom(arrived int) int {
	if arrived < fastRead {
		return 0
	}
	return int(max(s.budgets.Request.Available()/frameShare, 0))
}

// maxEvictionRounds bounds reserve's rounds: each round takes bytes, or
// closes one victim, or finds the victim it chose closing already (another
// loop chose it at the same time) and looks again.
const maxEvictionRounds = 4

// reserve takes n bytes of the request budget for cs; false: cs must
// close. On cs's loop, holding cs.frameMu (released and taken again while
// it waits for a victim's).
//
// When the budget is spent a connection cannot wait for room (gnet reads
// its socket whatever we do), so room is made by closing the connection
// that holds the most request bytes (see chooseVictim), if that is another
// one and holds more than cs would. Its frame buffer is given back at once,
// under its frameMu: taken at once when free (always so on cs's own gnet
// loop), else once its loop's current pass over it ends. The bytes gnet
// holds for a victim are only given back when its close runs on its loop,
// at that loop's next pass; until then they are lent: others may take them
// ahead of the release (evictions).
//
// Invariant: Used <= capacity + what gnet holds for chosen victims until
// their close runs (Releasing in MemoryStats) + a read's worth per
// connection waiting for the budget with requests in flight (see
// waitForBudget) + what gnet reads for a connection being handed off
// while its responses drain (handoff.go; bounded per connection by
// MaxRequestBytes+4 MiB, as a paused connection's input always was), and
// Used passes twice the capacity by at most one
// reservation per loop: past it a connection that needs more is closed
// rather than lent to.
//
// Lock order: a goroutine holding a frameMu never waits for another (it
// may TryLock one), and waits for one only holding none, so loops cannot
// wait on each other. (A TLS reader waits holding its own loop lock, which
// nothing holding a frameMu takes.)
func (s *Server) reserve(cs *connState, n int64) bool {
	b := s.budgets.Request
	for range maxEvictionRounds {
		if cs.closing.Load() {
			// Chosen to close (while we waited for a victim, its frame
			// was dropped): it takes nothing more.
			return false
		}
		if b.TryAcquire(n) {
			s.budgets.notePeak()
			return true
		}
		// What is free, and the rest from bytes being given back by
		// victims already chosen, rather than close another connection.
		got := b.AcquireUpTo(n)
		if rest := n - got; b.Used()+rest <= 2*b.Capacity() && s.evicting.take(rest) {
			b.Force(rest)
			s.budgets.notePeak()
			return true
		}
		b.Release(got)
		victim, locked := s.chooseVictim(cs, cs.reqHeld.Load()+n)
		if victim == nil {
			return false
		}
		if locked {
			s.evict(victim)
			victim.frameMu.Unlock()
			continue
		}
		// Its loop is framing it this instant: wait for that pass to end.
		cs.frameMu.Unlock()
		victim.frameMu.Lock()
		s.evict(victim)
		victim.frameMu.Unlock()
		cs.frameMu.Lock()
	}
	return false
}

// evict closes v for the request budget, unless it is closing or closed
// already: its frame buffer is given back now, what gnet holds for it is
// lent until its close runs. Holding v.frameMu.
func (s *Server) evict(v *connState) {
	if v.evicted.Load() == evictedGone || !v.closing.CompareAndSwap(false, true) {
		return
	}
	s.closed[closeRequestBudget].Add(1)
	s.log.Warn("closing connection: request memory budget spent, this connection holds the most", "held", v.reqHeld.Load(), "remote", v.info.RemoteAddr)
	v.dropFrame()
	s.evicting.chosen(v)
	_ = v.edge().Close()
}

// chooseVictim picks the connection to close for cs's want: of the others
// not closing that hold more than least request bytes, the largest whose
// frameMu is free (locked: taken, the caller unlocks it), else the largest
// (its loop is framing it; the caller waits for it). nil: none holds so
// much.
func (s *Server) chooseVictim(cs *connState, least int64) (victim *connState, locked bool) {
	type holder struct {
		cs   *connState
		held int64
	}
	var hs []holder
	s.conns.Range(func(_, v any) bool {
		o := v.(*connState)
		if h := o.reqHeld.Load(); o != cs && h > least && !o.closing.Load() {
			hs = append(hs, holder{o, h})
		}
		return true
	})
	if len(hs) == 0 {
		return nil, false
	}
	slices.SortFunc(hs, func(a, b holder) int { return cmp.Compare(b.held, a.held) })
	for _, h := range hs {
		if h.cs.frameMu.TryLock() {
			return h.cs, true
		}
	}
	return hs[0].cs, false
}

// dropFrame gives back the buffer of the frame cs was reading; cs is
// closing and reads nothing more. Holding cs.frameMu.
func (cs *connState) dropFrame() {
	if c := int64(cap(cs.partial)); c > 0 {
		cs.partial, cs.want, cs.pooled = nil, 0, nil
		cs.reqHeld.Add(-c)
		cs.srv.budgets.Request.Release(c)
	}
	cs.frameBegan.Store(0)
}

// notePeak records the request budget's use as its high-water mark if it
// is the highest yet. Any goroutine.
func (b *Budgets) notePeak() {
	u := b.Request.Used()
	for {
		p := b.requestPeak.Load()
		if u <= p || b.requestPeak.CompareAndSwap(p, u) {
			return
		}
	}
}

// evictedGone marks a connection's evicted field once its close has run:
// a victim chosen after that has nothing left to give back.
const evictedGone = -1

// evictions are the request bytes of connections closed for the request
// budget whose close has not run yet. pending is what they held when
// chosen; credit is what of it others may still take ahead of the release.
// Taking from credit lets the budget's use pass its capacity by at most
// pending, bytes that are being given back.
type evictions struct {
	pending atomic.Int64
	credit  atomic.Int64
}

// chosen lends what victim holds. The victim's close may run on its own
// loop meanwhile: whichever of chosen and closed comes second undoes the
// other's counting, so nothing stays lent for a connection that is gone.
// Any goroutine.
func (e *evictions) chosen(victim *connState) {
	h := victim.reqHeld.Load()
	if h <= 0 {
		return
	}
	e.pending.Add(h)
	e.add(h)
	if !victim.evicted.CompareAndSwap(0, h) {
		// Gone already: what it held was given back with its close.
		e.pending.Add(-h)
		e.add(-h)
	}
}

// closed takes back what cs's eviction lent, once cs's close has given
// its bytes back. On cs's loop, after the release.
func (e *evictions) closed(cs *connState) {
	if h := cs.evicted.Swap(evictedGone); h > 0 {
		e.pending.Add(-h)
		e.add(-h)
	}
}

// take takes n bytes of credit if there are so many.
func (e *evictions) take(n int64) bool {
	for {
		c := e.credit.Load()
		if c < n {
			return false
		}
		if e.credit.CompareAndSwap(c, c-n) {
			return true
		}
	}
}

// add adds d (may be negative) to the credit, never below zero: a close
// that runs takes back its credit, or what is left of it.
func (e *evictions) add(d int64) {
	for {
		c := e.credit.Load()
		if e.credit.CompareAndSwap(c, max(c+d, 0)) {
			return
		}
	}
}
