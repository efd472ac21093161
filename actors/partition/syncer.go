package partition

import (
	"fmt"

	"github.com/regent-broker/regent/storage"
)

// Group commit for SyncAlways (issue 13).
//
// The actor appends and goes on; a goroutine of its own (the syncer, one
// per sync, so that an idle partition holds none: a parked goroutine per
// partition was a third of an idle partition's memory) runs each fsync.
// Requests whose bytes must be durable before their answer wait in a queue, in the order they finished, for a sync that
// started after their append: the one in flight if it started after (its
// offset is below the log end the sync started at), else the next one.
// Every request appended while a sync runs is covered by the next, so a
// partition under load does one fsync per group of requests rather than
// one per request, and the actor appends while the disk flushes.
//
// What readers see: with SyncAlways the read view (high watermark, last
// stable offset, aborted transactions) is published only when a sync that
// started after it was taken has succeeded, so consumers never read
// records a crash could take back. A failed sync publishes nothing and
// fails every durable request it covered with KAFKA_STORAGE_ERROR; the log
// then fails every later Sync too (storage.Log.Sync), so nothing after it
// is acknowledged or published either.
//
// Without SyncAlways nothing waits: the view is published and the request
// answered at once. The periodic fsync (syncMsg) still runs on the syncer,
// so that the actor appends while it writes back.

// syncWaiter is a finished request whose answer waits for a sync (or for
// the answers ahead of it). synced is called on the actor goroutine, once,
// in queue order: err is nil, or the error of the sync that covered it
// when its bytes had to be durable.
type syncWaiter interface {
	synced(a *partitionActor, err error)
}

// waiting is one queued answer.
type waiting struct {
	w syncWaiter
	// need is the number of the sync whose completion releases it.
	need uint64
	// durable: the answer depends on that sync succeeding. A request
	// that did not need its bytes synced (acks=0, an error) waits only
	// to keep the answers in order.
	durable bool
}

// groupCommit is the actor's side of the syncer. Every field is owned by
// the actor goroutine, except reqs and results, which are channels shared
// with the syncer goroutine.
type groupCommit struct {
	// started counts the syncs handed to the syncer; done, those whose
	// outcome the actor has taken. At most one is in flight:
	// started == done+1 while it runs.
	started, done uint64
	// wanted: the state changed (an append, a marker, a view change) since
	// the in-flight sync started, so another must follow it.
	wanted bool
	// view is the read view taken when the in-flight sync started: what
	// that sync makes durable, published when it succeeds.
	view *ReadView
	// end is the log end offset when the in-flight sync started: it covers
	// every record below. (The actor is the log's only writer, and appends
	// and starts syncs on its own goroutine, so a record's offset says on
	// which side of a sync's start its append was.)
	end int64
	// queue holds the answers not yet given, in finish order; need is
	// non-decreasing along it.
	queue []waiting
	// results carries each sync's outcome back (capacity 1: never more
	// than one in flight); the syncedMsg that follows only wakes the actor
	// to take it. nil until the first sync.
	results chan error
	// syncLog is storage.Log.Sync but in tests; set in Open, read by the
	// syncer goroutine it starts after.
	syncLog func(*storage.Log) error
	// failures counts failed syncs: the first is logged as an error, the
	// rest (the log fails every Sync after one failed) at debug, or a
	// partition still taking produces would log one per group.
	failures int
}

// syncedMsg tells the actor that the in-flight sync has an outcome in
// results.
type syncedMsg struct{}

// syncAfter answers w once a sync that started after the append at offset
// (its first offset; -1: nothing appended) has completed (durable), or
// once every answer queued ahead of it has been given (!durable). Without
// SyncAlways it publishes and answers at once. Actor goroutine.
func (a *partitionActor) syncAfter(w syncWaiter, durable bool, offset int64) {
	if a.sync != SyncAlways {
		a.publish()
		w.synced(a, nil)
		return
	}
	g := &a.gc
	answerNow := false
	switch {
	case durable:
		need := g.started + 1 // the next sync, started now if none runs
		if g.started > g.done && offset < g.end {
			need = g.started // appended before the sync in flight began
		} else {
			g.wanted = true
		}
		if n := len(g.queue); n > 0 {
			need = max(need, g.queue[n-1].need) // answers stay in order
		}
		g.queue = append(g.queue, waiting{w: w, need: need, durable: true})
	case len(g.queue) > 0:
		g.queue = append(g.queue, waiting{w: w, need: g.queue[len(g.queue)-1].need})
	default:
		answerNow = true
	}
	// The request may have changed the view without needing its bytes
	// durable (an acks=0 append): that too waits for a sync to be seen.
	a.publishSynced()
	a.startSync()
	if answerNow {
		w.synced(a, nil)
	}
}

// publishSynced is publish for SyncAlways: the current view goes out
// with the next sync to start, unless it is what readers see already (or
// what the sync in flight will publish). The caller starts the sync.
// Actor goroutine.
func (a *partitionActor) publishSynced() {
	g := &a.gc
	if g.wanted {
		return
	}
	v := a.sl.st.View()
	if g.started > g.done {
		if v.sameAs(g.view) {
			return
		}
	} else if v.sameAs(a.p.view.Load()) {
		return
	}
	g.wanted = true
}

// startSync hands the syncer the next sync if one is wanted and none is in
// flight. Actor goroutine.
func (a *partitionActor) startSync() {
	g := &a.gc
	if !g.wanted || g.started > g.done || a.closed {
		return
	}
	if g.results == nil {
		g.results = make(chan error, 1)
	}
	g.wanted = false
	g.view = a.sl.st.View()
	g.end = a.p.log.NextOffset()
	g.started++
	go a.runSync(g.syncLog, a.p.log, g.results)
}

// runSync is the syncer goroutine of one sync: one Log.Sync, its outcome
// sent back.
func (a *partitionActor) runSync(syncLog func(*storage.Log) error, lg *storage.Log, results chan<- error) {
	results <- syncLog(lg)
	// Refused once the actor closed: close takes the result from results
	// itself.
	a.send(syncedMsg{})
}

// synced takes the in-flight sync's outcome, if it has come, and answers
// what it released. Actor goroutine.
func (a *partitionActor) synced() {
	g := &a.gc
	if g.started == g.done {
		return // close took the outcome already
	}
	select {
	case err := <-g.results:
		a.syncDone(err)
	default:
	}
}

// syncDone records the outcome of the in-flight sync, publishes its view
// if it succeeded, answers the requests it released in order, and starts
// the next sync if one is wanted. Actor goroutine.
func (a *partitionActor) syncDone(err error) {
	g := &a.gc
	g.done++
	if err != nil {
		g.failures++
		switch {
		case g.failures > 1:
			a.logger.Debug("fsync failed again", "failures", g.failures, "err", err)
		case a.sync == SyncAlways:
			a.logger.Error("fsync failed: the requests it covered fail, and the partition publishes nothing more", "err", err)
		default:
			a.logger.Error("periodic fsync failed: the log refuses every later fsync", "err", err)
		}
		err = fmt.Errorf("fsync: %w", err)
	} else if a.sync == SyncAlways {
		// Without SyncAlways the view was published as it changed; this
		// one may be older.
		a.store(g.view)
	}
	g.view = nil
	n := 0
	// synced only replies (it queues nothing), so the queue holds still.
	for ; n < len(g.queue) && g.queue[n].need <= g.done; n++ {
		if q := g.queue[n]; q.durable {
			q.w.synced(a, err)
		} else {
			q.w.synced(a, nil)
		}
	}
	rest := copy(g.queue, g.queue[n:])
	clear(g.queue[rest:]) // no answered request stays reachable
	g.queue = g.queue[:rest]
	a.startSync()
}

// drainSyncs answers every queued request when the partition closes: it
// waits for the sync in flight, then syncs once more for what that did not
// cover (the sync close makes anyway; with remove, only if an answer
// waits for it). It returns that last sync's error.
// Actor goroutine, after closed is set (so that no sync starts again).
func (a *partitionActor) drainSyncs(remove bool) error {
	g := &a.gc
	if g.started > g.done {
		a.syncDone(<-g.results)
	}
	if remove && len(g.queue) == 0 {
		return nil
	}
	err := g.syncLog(a.p.log)
	if err == nil && a.sync == SyncAlways {
		a.store(a.sl.st.View())
	}
	for _, q := range g.queue {
		if q.durable && err != nil {
			q.w.synced(a, fmt.Errorf("fsync at close: %w", err))
		} else {
			q.w.synced(a, nil)
		}
	}
	g.queue = nil
	return err
}
