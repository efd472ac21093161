package txn

// Idle transactional ids rest without an actor. An id whose transaction
// is over (Empty, CompleteCommit, CompleteAbort) has nothing to run but
// its expiry, a week away by default, yet an actor costs about 1.4 KiB
// (process, mailbox, context, logger, timer) beside the state's few hundred
// bytes. Kafka Streams and Flink leave many such ids behind (one per task,
// or per subtask and checkpoint). So once an idle id's actor has answered
// everything sent to it, it hands its state back to the coordinator and
// stops; the id stays listed (its Summary) and held (the budget counts
// it). A request for it wakes it: a new actor starts from the same state
// (dispatch). The coordinator's sweeper wakes resting ids whose expiry has
// come, and their actors expire them as before; an id the budget picks is
// woken to be expired the same way. Ids load resting at activation.

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// restable says t can rest: an id whose transaction is over.
func restable(t *Txn) bool { return t != nil && t.State.terminal() }

// maybeRest hands an idle id's state to the coordinator and retires the
// actor: nothing waits on it and no marker or retry is in flight. Called
// after each message but Started (a woken actor first serves what woke
// it). A message already on its way is handed back by the retired actor
// and wakes the id again.
func (a *txnActor) maybeRest() {
	if a.retired || a.closed || !restable(a.t) || len(a.waiters) > 0 || a.retry != nil {
		return
	}
	a.stopTimers()
	a.retired = true
	a.c.rest(a.id, a.self, a.t)
}

// rest takes id's state from its actor pid, if pid is still the id's
// actor (one taken by Deactivate or Close is stopped by them), and sends
// the actor its last message.
func (c *Coordinator) rest(id string, pid *actor.PID, t *Txn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.mu.actors[id]; cur != nil && cur.Equal(pid) {
		delete(c.mu.actors, id)
		c.mu.resting[id] = t
		c.o.Root.Send(pid, &retireMsg{})
	}
}

// wakeLocked starts an actor for a resting id (mu held) and returns it.
func (c *Coordinator) wakeLocked(id string) *actor.PID {
	t := c.mu.resting[id]
	delete(c.mu.resting, id)
	return c.spawnLocked(id, t)
}

// sweepInterval is how often resting ids are checked for expiry: a minute,
// or less for a short transactional.id.expiration.ms (tests). Kafka checks
// every transactional.id.expiration's cleanup interval, an hour.
func (c *Coordinator) sweepInterval() time.Duration {
	return min(time.Minute, max(c.o.IDExpiration/4, 10*time.Millisecond))
}

// sweepResting wakes the resting ids whose expiry has come, every
// sweepInterval until stop (the activation's) closes; their actors expire
// them. Its own goroutine.
func (c *Coordinator) sweepResting(stop <-chan struct{}) {
	t := time.NewTicker(c.sweepInterval())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := c.o.Now().UnixMilli()
		c.mu.Lock()
		if !c.mu.active || c.mu.closed {
			c.mu.Unlock()
			return
		}
		for id, tx := range c.mu.resting {
			if at, ok := tx.ExpiresAt(c.cfg); ok && at <= now {
				c.wakeLocked(id)
			}
		}
		c.mu.Unlock()
	}
}
