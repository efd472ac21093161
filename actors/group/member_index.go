package group

// Indexes that keep a KIP-848 or streams group's per-heartbeat work
// independent of its size: a heartbeat touches one member, so it must not
// sort every member id, or union every member's partitions, to do so.

import (
	"slices"
	"time"
)

// memberIDs is a group's member ids, kept sorted as members come and go
// (a binary search and one move each), for the steps that walk members in
// order. Owned by the group's actor, like the group.
type memberIDs []string

func (s *memberIDs) add(id string) {
	if i, ok := slices.BinarySearch(*s, id); !ok {
		*s = slices.Insert(*s, i, id)
	}
}

func (s *memberIDs) remove(id string) {
	if i, ok := slices.BinarySearch(*s, id); ok {
		*s = slices.Delete(*s, i, i+1)
	}
}

// addMember adds m (with what it holds) to the group's members and indexes.
func (c *consumerGroup) addMember(m *cgMember) {
	c.members[m.id] = m
	c.ids.add(m.id)
	c.index(m)
	c.touch(m.id)
}

// touch marks a member whose record the step must write.
func (c *consumerGroup) touch(id string) {
	if c.touched == nil {
		c.touched = map[string]bool{}
	}
	c.touched[id] = true
	delete(c.gone, id)
}

// removeMember takes m out of the group's members and indexes.
func (c *consumerGroup) removeMember(m *cgMember) {
	c.unindex(m)
	delete(c.members, m.id)
	c.ids.remove(m.id)
	c.subsStale = true
	delete(c.touched, m.id)
	if c.gone == nil {
		c.gone = map[string]bool{}
	}
	c.gone[m.id] = true
	if len(c.members) == 0 {
		// No member, no deadline: the group may rest.
		c.floor.at, c.floor.known = time.Time{}, true
	}
}

// setHoldings changes what m holds, keeping the owner index in step.
func (c *consumerGroup) setHoldings(m *cgMember, assigned, pendingRevoke assignment) {
	c.unindex(m)
	m.assigned, m.pendingRevoke = assigned, pendingRevoke
	c.index(m)
}

// index records m as the owner of every partition it holds (assigned or
// being revoked). A partition is handed out only once free, so it has
// one owner at most.
func (c *consumerGroup) index(m *cgMember) {
	if c.owners == nil {
		c.owners = map[partKey]string{}
	}
	for _, a := range []assignment{m.assigned, m.pendingRevoke} {
		for t, ps := range a {
			for _, p := range ps {
				c.owners[partKey{t, p}] = m.id
			}
		}
	}
}

func (c *consumerGroup) unindex(m *cgMember) {
	for _, a := range []assignment{m.assigned, m.pendingRevoke} {
		for t, ps := range a {
			for _, p := range ps {
				k := partKey{t, p}
				if c.owners[k] == m.id {
					delete(c.owners, k)
				}
			}
		}
	}
}

// heldByOther reports whether a member other than id holds the partition.
func (c *consumerGroup) heldByOther(id string, k partKey) bool {
	owner, ok := c.owners[k]
	return ok && owner != id
}

// rebuildIndexes makes the indexes from the members (after decoding).
func (c *consumerGroup) rebuildIndexes() {
	c.ids = c.ids[:0]
	c.owners = map[partKey]string{}
	for id, m := range c.members {
		c.ids = append(c.ids, id)
		c.index(m)
	}
	slices.Sort(c.ids)
	c.subsStale = true
}
