package group

// The group budget. A group id costs a client nothing: one OffsetCommit
// (generation -1) or JoinGroup under a new id makes a group, kept until
// offsets.retention.minutes (a week) after it empties. Resting without an
// actor (dormant.go) a group with one offset still costs ~1.1 KiB of heap,
// so without a bound a stream of new ids grows the broker's memory for a
// week. Options.MaxGroups bounds the groups held: a request that would
// create one more is refused with POLICY_VIOLATION, which clients report
// instead of retrying; existing groups go on as before. A group's
// committed offsets are the consumers' positions, so nothing is dropped
// to make room.

import "time"

// roomLocked reports (with mu held) whether a new group may be created:
// the groups held (with an actor or resting) are under the budget.
func (m *Manager) roomLocked(id string) bool {
	if m.maxGroups <= 0 {
		return true
	}
	held := len(m.mu.actors) + len(m.mu.dormant)
	if held < m.maxGroups {
		return true
	}
	if m.refusedLog.Allow(10 * time.Second) {
		m.logger.Warn("group budget reached: refusing requests that would create a group (POLICY_VIOLATION); raise --max-groups or delete groups",
			"group", id, "held", held, "limit", m.maxGroups)
	}
	return false
}

// Held is the number of groups the coordinator holds (with an actor or
// resting; none on standby), and the budget (0: none).
func (m *Manager) Held() (held, limit int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.actors) + len(m.mu.dormant), m.maxGroups
}

// PendingHeld is the pending member ids the groups hold, and their bound
// (pending.go).
func (m *Manager) PendingHeld() (held, limit int64) { return m.cfg.Pending.Held() }
