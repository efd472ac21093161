package topics

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/regent-broker/regent/actors/replication"
)

// PartitionGroups is how a cluster running partition raft groups
// (--raft-groups) places partitions: each new partition is ordered by one
// of Count groups, numbered 1 to Count (0 is the metadata group), whose
// leader leads it. The groups are the node's, opened before the registry;
// their number is the same on every node.
type PartitionGroups struct {
	Count int
	// Repl is group g's replicator.
	Repl func(g uint8) replication.Replicator
	// Dir is group g's state directory, which its snapshots capture.
	Dir func(g uint8) string
}

// MaxPartitionGroups bounds Count: a group is a uint8, and 0 is the
// metadata group.
const MaxPartitionGroups = 255

// PreferredLeader is partition raft group g's preferred node among
// voters: the groups take the voters in id order, in turn, so leadership
// is spread evenly when every group is led by its preferred node. -1 for
// the metadata group or no voters.
func PreferredLeader(g uint8, voters []int32) int32 {
	if len(voters) == 0 || g == 0 {
		return -1
	}
	vs := slices.Sorted(slices.Values(voters))
	return vs[(int(g)-1)%len(vs)]
}

func (g *PartitionGroups) count() int {
	if g == nil {
		return 0
	}
	return g.Count
}

// place chooses the groups of partitions [from, to) of the topic with id
// (nil without partition groups). Consecutive partitions go to consecutive
// groups, from a start the id picks, so a topic's partitions spread over
// the groups, and so over their leaders, whatever its size; the id, not
// the name, so a re-created topic is placed afresh.
func (g *PartitionGroups) place(id [16]byte, from, to int32) []uint8 {
	n := g.count()
	if n == 0 || to <= from {
		return nil
	}
	h := fnv.New32a()
	_, _ = h.Write(id[:])
	start := int(h.Sum32() % uint32(n))
	out := make([]uint8, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, uint8(1+(start+int(i))%n))
	}
	return out
}

// ReloadGroup closes the partitions partition group g orders, calls
// restore (which rewrites the group's state directory: a snapshot the
// group's leader installed on this running node), and opens them again in
// place, publishing topics that hold the new partitions. Topic changes
// wait meanwhile (it holds the registry's lock), so no partition of g is
// created or deleted under it. On error the partitions of g stay closed
// and the caller restarts the node.
func (r *Registry) ReloadGroup(g uint8, restore func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return errors.New("topics: reload of a closed registry")
	}
	var errs []error
	for _, t := range r.snapshot.Load().byName {
		for i, p := range t.Partitions {
			if t.PartitionGroup(int32(i)) == g {
				errs = append(errs, p.Close(false))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close raft group %d's partitions: %w", g, err)
	}
	if err := restore(); err != nil {
		return err
	}
	reopened := map[string]*Topic{}
	for _, t := range r.snapshot.Load().byName {
		var nt *Topic
		for i := range t.Partitions {
			if t.PartitionGroup(int32(i)) != g {
				continue
			}
			if nt == nil {
				c := *t
				c.Partitions = slices.Clone(t.Partitions)
				nt = &c
			}
			p, err := r.openPartition(nt, int32(i))
			if err != nil {
				return fmt.Errorf("reopen partition %s-%d of raft group %d: %w", t.Name, i, g, err)
			}
			nt.Partitions[i] = p
		}
		if nt != nil {
			reopened[nt.Name] = nt
		}
	}
	return r.publish(func(s *snapshot) {
		for name, t := range reopened {
			s.byName[name] = t
			s.byID[t.ID] = t
		}
	})
}
