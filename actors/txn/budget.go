package txn

// The transactional-id budget. Every id a client names in InitProducerId
// costs the coordinator its state (a few hundred bytes while it rests,
// rest.go; an actor and a timer beside it while in use), kept until
// transactional.id.expiration.ms (a week) after the id's last use. A
// client can make ids up for nothing, so without a bound a stream of them
// grows the broker's memory for a week. Options.MaxIDs bounds the ids held:
// over it, the least recently updated idle ids (no transaction open or
// completing) expire early, as they would at their expiration, until the
// coordinator is back at 7/8 of the budget; when none is idle, a new id is
// refused with COORDINATOR_NOT_AVAILABLE (clients retry it) until an open
// transaction ends or times out. An id in use keeps its state: a
// producer that commits often stays recent.
//
// An expired id's next InitProducerId gets a new producer id at epoch 0;
// a zombie still holding the old producer id is refused by the coordinator
// (INVALID_PRODUCER_ID_MAPPING), as after a regular expiry.

import (
	"cmp"
	"slices"
	"time"
)

// evictMsg asks an id's actor to expire the id now, if it is still idle
// and unchanged since it was picked (lastUpdateMs).
type evictMsg struct{ lastUpdateMs int64 }

// idleID is an eviction candidate.
type idleID struct {
	id           string
	lastUpdateMs int64
}

// budgetLogEvery spaces the budget's log lines: under a flood of new ids a
// pass runs every limit/8 of them.
const budgetLogEvery = 10 * time.Second

// makeRoomLocked runs (with mu held) before an id is created. Under the
// budget it does nothing; over it, it asks the least recently updated
// idle ids to expire, enough to come back to 7/8 of the budget, and
// counts them gone at once (their actors persist the expiry
// asynchronously). It reports whether the new id fits.
func (c *Coordinator) makeRoomLocked() bool {
	limit := c.o.MaxIDs
	if limit <= 0 {
		return true
	}
	held := c.heldLocked()
	if held < limit {
		return true
	}
	victims := c.oldestIdleLocked(held - (limit - limit/8) + 1)
	for _, v := range victims {
		pid := c.mu.actors[v.id]
		if pid == nil {
			if c.mu.resting[v.id] == nil {
				continue // a summary always has one or the other
			}
			// Resting: woken to expire, as at its expiry (rest.go).
			pid = c.wakeLocked(v.id)
		}
		c.mu.evicting[v.id] = struct{}{}
		c.o.Root.Send(pid, &evictMsg{lastUpdateMs: v.lastUpdateMs})
	}
	c.mu.evictedUnlogged += len(victims)
	if c.mu.evictedUnlogged > 0 && c.evictLog.Allow(budgetLogEvery) {
		c.logger.Info("transactional id budget reached: expiring the least recently used idle ids early",
			"held", held, "limit", limit, "expiring_since_last_line", c.mu.evictedUnlogged)
		c.mu.evictedUnlogged = 0
	}
	if c.heldLocked() < limit {
		return true
	}
	if c.refusedLog.Allow(budgetLogEvery) {
		c.logger.Warn("transactional id budget reached and no id is idle: refusing new transactional ids (COORDINATOR_NOT_AVAILABLE) until open transactions end",
			"held", held, "limit", limit)
	}
	return false
}

// oldestIdleLocked picks up to n idle ids not already expiring, least
// recently updated first (ties by id, so the choice is deterministic).
func (c *Coordinator) oldestIdleLocked(n int) []idleID {
	if n <= 0 {
		return nil
	}
	var idle []idleID
	for id, s := range c.mu.summaries {
		if !s.State.terminal() {
			continue
		}
		if _, ok := c.mu.evicting[id]; ok {
			continue
		}
		idle = append(idle, idleID{id: id, lastUpdateMs: s.LastUpdateMs})
	}
	slices.SortFunc(idle, func(a, b idleID) int {
		return cmp.Or(cmp.Compare(a.lastUpdateMs, b.lastUpdateMs), cmp.Compare(a.id, b.id))
	})
	return idle[:min(n, len(idle))]
}

// evictDone: id's actor handled its evictMsg (expired or kept the id).
func (c *Coordinator) evictDone(id string) {
	c.mu.Lock()
	delete(c.mu.evicting, id)
	c.mu.Unlock()
}

// Held is the number of transactional ids the coordinator holds (those
// being expired by the budget not counted), and the budget (0: none).
// On standby it holds none.
func (c *Coordinator) Held() (held, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heldLocked(), c.o.MaxIDs
}

// heldLocked counts the ids with an actor or resting, less those being
// expired for the budget. Called with mu held.
func (c *Coordinator) heldLocked() int {
	return len(c.mu.actors) + len(c.mu.resting) - len(c.mu.evicting)
}

// evict expires the id early for the budget (evictMsg), if it is still
// idle and has not been used since it was picked.
func (a *txnActor) evict(m *evictMsg) {
	st := Evict(a.t, m.lastUpdateMs)
	if st.Next == nil {
		return
	}
	if err := a.apply(st); err != nil {
		a.logger.Warn("expire transactional id for the budget", "err", err)
	}
}
