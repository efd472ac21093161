package group

// Dormant groups. Most groups that exist are idle: a consumer group whose
// members have gone, or a group that only stores offsets (a simple
// consumer's, a framework committing on checkpoints), kept until
// offsets.retention.minutes. An actor costs ~1.4 KiB beside the group's
// state (its process, mailbox, context and logger), and group ids cost a
// client nothing, so an idle group keeps only its state: the manager holds
// it, and an actor is spawned for it again at its next request, or when
// its offsets expire or its topics are deleted.

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Dormant reports whether the group can rest without an actor: it exists,
// has no members (a classic group Empty, a KIP-848 group with none),
// nothing pending (member ids, transactional offsets) and no deadline. A
// KIP-848 group rests with its epochs, target assignment and subscription
// metadata, which its next member's heartbeat reads as an actor's would.
// Share groups keep their actors (their share-partition state is served
// through them).
func (g *Group) Dormant() bool {
	if !g.live || g.sg != nil || len(g.pending) > 0 || len(g.pendingTxn) > 0 || !g.NextDeadline().IsZero() {
		return false
	}
	if g.cg != nil {
		return len(g.cg.members) == 0
	}
	if g.st != nil {
		return len(g.st.members) == 0
	}
	return g.state == Empty && len(g.members) == 0
}

// ExpiryDue reports whether ExpireOffsets at now would drop anything.
func (g *Group) ExpiryDue(now time.Time) bool {
	drop, all := g.expiredOffsets(now)
	return len(drop) > 0 || all
}

// HasOffsetsFor reports whether the group holds offsets of a named topic.
func (g *Group) HasOffsetsFor(names map[string]bool) bool {
	for k := range g.offsets.Keys() {
		if names[k.topic] {
			return true
		}
	}
	return false
}

// hibernate moves an idle group from its actor to the manager (called by
// the actor, which has retired): the group stays listed, and the actor
// gets its last message. An actor that is no longer current (taken by
// Deactivate or Close) is left to them.
func (m *Manager) hibernate(id string, pid *actor.PID, g *Group, s Summary) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.mu.actors[id]; cur == nil || !cur.Equal(pid) {
		return
	}
	delete(m.mu.actors, id)
	m.mu.dormant[id] = g
	m.mu.summaries[id] = s
	m.root.Send(pid, &retireMsg{})
}

// redeliver hands a message that reached a retired actor (an expiry pass
// or deleted topics, sent before the group went to rest) to the group's
// current actor, or to one woken for it; a group that no longer exists
// needs neither.
func (m *Manager) redeliver(id string, msg any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed || !m.mu.active {
		return
	}
	if pid := m.mu.actors[id]; pid != nil {
		m.root.Send(pid, msg)
		return
	}
	if g := m.mu.dormant[id]; g != nil {
		m.root.Send(m.wakeLocked(id, g), msg)
	}
}

// wakeLocked gives a dormant group an actor again (with mu held), for a
// request or a message about to be sent to it.
func (m *Manager) wakeLocked(id string, g *Group) *actor.PID {
	delete(m.mu.dormant, id)
	return m.spawnLocked(id, g, true)
}

// wakeDueLocked wakes the dormant groups that want (with mu held) and
// sends each msg: expiry passes and deleted topics reach them as they
// reach groups with actors.
func (m *Manager) wakeDueLocked(want func(*Group) bool, msg any) int {
	var due []string
	for id, g := range m.mu.dormant {
		if want(g) {
			due = append(due, id)
		}
	}
	for _, id := range due {
		g := m.mu.dormant[id]
		m.root.Send(m.wakeLocked(id, g), msg)
	}
	return len(due)
}
