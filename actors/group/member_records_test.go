package group

import (
	"fmt"
	"testing"
)

// restoreFrom rebuilds a group from records through the store's codec, as
// a reopened coordinator does.
func restoreFrom(t *testing.T, h *harness, recs []Record) *Group {
	t.Helper()
	var decoded []Record
	for _, r := range recs {
		key, value := r.encode()
		d, err := decodeRecord(key, value)
		if err != nil {
			t.Fatal(err)
		}
		decoded = append(decoded, d)
	}
	g := NewGroup("g", &h.cfg)
	g.Restore(decoded, h.now)
	return g
}

// TestConsumerGroupWritesWhatChanged: a KIP-848 group's step writes the
// members it changed, not the group: a heartbeat that changes nothing
// writes nothing, a join writes the group record and the members whose
// targets moved, a leave a tombstone; restoring the records gives back
// the group.
func TestConsumerGroupWritesWhatChanged(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 8)
	var cs []*cgClient
	for i := range 50 {
		c := h.cgMember(topics, fmt.Sprintf("m%02d", i), "t")
		mustOK(t, c.id, c.beat())
		cs = append(cs, c)
	}
	// Settle: everyone heartbeats until nobody's state changes.
	for range 5 {
		for _, c := range cs {
			mustOK(t, c.id, c.beat())
		}
	}
	if h.g.cg.state() != Stable {
		t.Fatalf("state %v", h.g.cg.state())
	}
	n := len(h.records)
	mustOK(t, "steady heartbeat", cs[7].beat())
	if len(h.records) != n {
		t.Fatalf("a heartbeat that changed nothing wrote %d records", len(h.records)-n)
	}

	// One more member: the group record, the newcomer and the few members
	// whose target moved — not all 51.
	n = len(h.records)
	late := h.cgMember(topics, "z", "t")
	mustOK(t, "z joins", late.beat())
	groupRecs, memberRecs := 0, 0
	for _, r := range h.records[n:] {
		switch r.Kind {
		case RecConsumerGroup:
			groupRecs++
		case RecConsumerGroupMember:
			memberRecs++
		}
	}
	if groupRecs != 1 || memberRecs == 0 || memberRecs > 10 {
		t.Fatalf("a join wrote %d group and %d member records, want 1 and a few", groupRecs, memberRecs)
	}

	// A leave: its tombstone.
	n = len(h.records)
	mustOK(t, "m03 leaves", cs[3].leave(leaveEpoch))
	tomb := false
	for _, r := range h.records[n:] {
		if r.Kind == RecConsumerGroupMember && r.Member == "m03" && r.CGM == nil {
			tomb = true
		}
	}
	if !tomb {
		t.Fatal("no tombstone for the member that left")
	}

	g := restoreFrom(t, h, h.records)
	if g.cg == nil || len(g.cg.members) != len(h.g.cg.members) || g.cg.epoch != h.g.cg.epoch || g.cg.assignmentEpoch != h.g.cg.assignmentEpoch {
		t.Fatalf("restored %d members at epoch %d, want %d at %d", len(g.cg.members), g.cg.epoch, len(h.g.cg.members), h.g.cg.epoch)
	}
	for id, m := range h.g.cg.members {
		r := g.cg.members[id]
		if r == nil || r.epoch != m.epoch || r.state != m.state || !r.assigned.equal(m.assigned) || !r.pendingRevoke.equal(m.pendingRevoke) || !g.cg.target[id].equal(h.g.cg.target[id]) {
			t.Fatalf("member %s restored as %+v, want %+v", id, r, m)
		}
	}
	if g.cg.members["m03"] != nil {
		t.Fatal("the member that left came back")
	}
	checkInvariants(t, g)
}

// TestConsumerGroupLegacySnapshot: a group stored by an earlier release
// (one record, members inline) is read as it was, and its next change
// writes it whole in the new form, so the records after it restore the
// same group without the old one.
func TestConsumerGroupLegacySnapshot(t *testing.T) {
	h := newHarness(t, testConfig())
	topics := fakeTopics{}
	topics.add("t", 4)
	a, b := h.cgMember(topics, "a", "t"), h.cgMember(topics, "b", "t")
	for range 4 {
		mustOK(t, "a", a.beat())
		mustOK(t, "b", b.beat())
	}
	legacy := Record{Kind: RecConsumerGroup, Group: "g", CG: &cgSnapshot{raw: h.g.cg.encodeWithMembers()}}
	g := restoreFrom(t, h, []Record{legacy})
	if g.cg == nil || len(g.cg.members) != 2 || !g.cg.legacy {
		t.Fatalf("legacy snapshot restored as %+v", g.cg)
	}
	h.g, h.records = g, nil
	c := h.cgMember(topics, "c", "t")
	mustOK(t, "c joins", c.beat())
	written := map[string]bool{}
	for _, r := range h.records {
		if r.Kind == RecConsumerGroupMember && r.CGM != nil {
			written[r.Member] = true
		}
	}
	if !written["a"] || !written["b"] || !written["c"] {
		t.Fatalf("after a legacy snapshot the first change wrote members %v, want all three", written)
	}
	// The new group record replaces the legacy one in the store: restore
	// from the new records alone.
	g2 := restoreFrom(t, h, h.records)
	if g2.cg == nil || len(g2.cg.members) != 3 || g2.cg.epoch != h.g.cg.epoch {
		t.Fatalf("restored from the new form: %+v", g2.cg)
	}
}
