package group

// The persisted form of a consumer group's state. Version 3 (this one):
// a group record with the epochs and subscription metadata and no
// members, and one record per member (key: group and member id), so a
// step writes only what it changed. Versions 1 and 2 held every member
// inline; they are still read, and a group read from one is written whole
// in the new form at its next change.
//
//	group:  version u8 | epoch i32 | assignmentEpoch i32
//	        topics: n u32, { name str | id [16] | partitions i32 }
//	        members: n u32 (0 from version 3), { member }
//	member record: cgMemberVersion u8 | member
//	member: id str | instance nstr | rack nstr | clientID str |
//	  clientHost str | names: n u32 {str} | regex nstr | assignor nstr |
//	  rebalanceTimeoutMs i32 | epoch i32 | prevEpoch i32 | state u8 |
//	  resolved: n u32 {str} | assigned asg | pendingRevoke asg | target asg |
//	  assignedAt: n u32, { id [16] | partition i32 | epoch i32 }
//	asg: n u32, { id [16] | n u32 { i32 } }
//
// Version 1 has no assignedAt; its members' partitions read back with the
// member's epoch as their assignment epoch (the strict pre-KIP-1251 rule).
//
// str is u32 length + bytes; nstr is i32 length (-1: null) + bytes.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

const cgCodecVersion = 3

// cgMemberVersion opens a member record's value.
const cgMemberVersion = 1

// cgSnapshot holds an encoded consumer group (encoded when the record is
// made, so later changes to the group cannot race with the write).
type cgSnapshot struct{ raw []byte }

func (s *cgSnapshot) appendTo(dst []byte) []byte { return append(dst, s.raw...) }

func readCGSnapshot(b []byte) (*cgSnapshot, error) {
	if _, err := decodeConsumerGroup(b); err != nil {
		return nil, err
	}
	return &cgSnapshot{raw: append([]byte(nil), b...)}, nil
}

type cgWriter struct{ b []byte }

func (w *cgWriter) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *cgWriter) i32(v int32)  { w.u32(uint32(v)) }
func (w *cgWriter) str(s string) { w.u32(uint32(len(s))); w.b = append(w.b, s...) }
func (w *cgWriter) nstr(s *string) {
	if s == nil {
		w.i32(-1)
		return
	}
	w.str(*s)
}
func (w *cgWriter) strs(ss []string) {
	w.u32(uint32(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}
func (w *cgWriter) asg(a assignment) {
	ids := topicsOf(a)
	w.u32(uint32(len(ids)))
	for _, id := range ids {
		w.b = append(w.b, id[:]...)
		w.u32(uint32(len(a[id])))
		for _, p := range a[id] {
			w.i32(p)
		}
	}
}

// head writes what consumer and share group snapshots both open with.
func (w *cgWriter) head(version byte, epoch, assignmentEpoch int32, topics map[string]topicMeta) {
	w.b = append(w.b, version)
	w.i32(epoch)
	w.i32(assignmentEpoch)
	names := sortedTopicNames(topics)
	w.u32(uint32(len(names)))
	for _, n := range names {
		t := topics[n]
		w.str(t.name)
		w.b = append(w.b, t.id[:]...)
		w.i32(t.partitions)
	}
}

// encode is the group-level snapshot (version 3): epochs and subscription
// metadata. Each member is its own record (encodeMember), so a heartbeat
// that changes one member writes that member, not the whole group.
func (c *consumerGroup) encode() []byte {
	w := &cgWriter{}
	w.head(cgCodecVersion, c.epoch, c.assignmentEpoch, c.topics)
	w.u32(0) // members: in their own records from version 3
	return w.b
}

// encodeWithMembers is the version 2 form, every member inline: what
// earlier releases wrote, kept for the codec's tests.
func (c *consumerGroup) encodeWithMembers() []byte {
	w := &cgWriter{}
	w.head(2, c.epoch, c.assignmentEpoch, c.topics)
	ids := c.sortedMembers()
	w.u32(uint32(len(ids)))
	for _, id := range ids {
		w.member(c.members[id], c.target[id])
	}
	return w.b
}

// encodeMember is one member's record value: cgMemberVersion, then the
// member as in a version 2 group snapshot.
func (c *consumerGroup) encodeMember(id string) []byte {
	w := &cgWriter{b: []byte{cgMemberVersion}}
	w.member(c.members[id], c.target[id])
	return w.b
}

func (w *cgWriter) member(m *cgMember, target assignment) {
	w.str(m.id)
	w.nstr(m.instanceID)
	w.nstr(m.rackID)
	w.str(m.clientID)
	w.str(m.clientHost)
	w.strs(m.subscribedNames)
	w.nstr(m.subscribedRegex)
	w.nstr(m.serverAssignor)
	w.i32(int32(m.rebalanceTimeout / time.Millisecond))
	w.i32(m.epoch)
	w.i32(m.prevEpoch)
	w.b = append(w.b, byte(m.state))
	w.strs(m.resolved)
	w.asg(m.assigned)
	w.asg(m.pendingRevoke)
	w.asg(target)
	keys := make([]partKey, 0, len(m.assignedAt))
	for k := range m.assignedAt {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b partKey) int {
		if c := bytes.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	w.u32(uint32(len(keys)))
	for _, k := range keys {
		w.b = append(w.b, k.topic[:]...)
		w.i32(k.partition)
		w.i32(m.assignedAt[k])
	}
}

type cgReader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated consumer group snapshot")

func (r *cgReader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
func (r *cgReader) u32() uint32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
func (r *cgReader) i32() int32 { return int32(r.u32()) }
func (r *cgReader) count() int {
	n := r.u32()
	// Every element takes at least 4 bytes: a larger count is corrupt.
	if int64(n)*4 > int64(len(r.b)) {
		r.err = errShort
		return 0
	}
	return int(n)
}
func (r *cgReader) str() string { return string(r.take(int(r.u32()))) }
func (r *cgReader) nstr() *string {
	n := r.i32()
	if n < 0 {
		return nil
	}
	s := string(r.take(int(n)))
	return &s
}
func (r *cgReader) strs() []string {
	n := r.count()
	var out []string
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}
func (r *cgReader) id() (id [16]byte) {
	copy(id[:], r.take(16))
	return id
}
func (r *cgReader) asg() assignment {
	n := r.count()
	var a assignment
	for i := 0; i < n && r.err == nil; i++ {
		id := r.id()
		k := r.count()
		for j := 0; j < k && r.err == nil; j++ {
			a = a.add(id, r.i32())
		}
	}
	return a
}

// readHead checks the snapshot's version and reads what consumer and share
// group snapshots both open with (see cgWriter.head); kind names the group
// kind in errors. The reader it returns is positioned at the members.
func readHead(b []byte, version byte, kind string, epoch, assignmentEpoch *int32, topics map[string]topicMeta) (*cgReader, error) {
	return readHeadFrom(b, version, version, kind, epoch, assignmentEpoch, topics)
}

// readHeadFrom is readHead for a kind that reads versions minVersion to
// version.
func readHeadFrom(b []byte, minVersion, version byte, kind string, epoch, assignmentEpoch *int32, topics map[string]topicMeta) (*cgReader, error) {
	if len(b) == 0 || b[0] < minVersion || b[0] > version {
		return nil, fmt.Errorf("unknown %s group snapshot version", kind)
	}
	r := &cgReader{b: b[1:]}
	*epoch = r.i32()
	*assignmentEpoch = r.i32()
	nt := r.count()
	for i := 0; i < nt && r.err == nil; i++ {
		t := topicMeta{name: r.str(), id: r.id(), partitions: r.i32()}
		topics[t.name] = t
	}
	return r, nil
}

// done reports a read error or bytes left after the members.
func (r *cgReader) done(kind string) error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%d trailing bytes in %s group snapshot", len(r.b), kind)
	}
	return nil
}

func decodeConsumerGroup(b []byte) (*consumerGroup, error) {
	c := newConsumerGroup()
	r, err := readHeadFrom(b, 1, cgCodecVersion, "consumer", &c.epoch, &c.assignmentEpoch, c.topics)
	if err != nil {
		return nil, err
	}
	version := b[0]
	nm := r.count()
	if version >= 3 && nm != 0 {
		return nil, fmt.Errorf("consumer group snapshot version %d with %d members inline", version, nm)
	}
	for i := 0; i < nm && r.err == nil; i++ {
		c.putMember(r.member(version >= 2))
	}
	if err := r.done("consumer"); err != nil {
		return nil, err
	}
	c.legacy = version < 3 && nm > 0
	c.rebuildIndexes()
	return c, nil
}

// decodeCGMember reads one member's record value (encodeMember).
func decodeCGMember(b []byte) (*cgMember, assignment, error) {
	if len(b) == 0 || b[0] != cgMemberVersion {
		return nil, nil, errors.New("unknown consumer group member record version")
	}
	r := &cgReader{b: b[1:]}
	m, target := r.memberWithTarget(true)
	if err := r.done("consumer group member"); err != nil {
		return nil, nil, err
	}
	if m.id == "" {
		return nil, nil, errors.New("consumer group member record without a member id")
	}
	return m, target, nil
}

// cgMemberRead is a member as read, with its target.
type cgMemberRead struct {
	m      *cgMember
	target assignment
}

func (r *cgReader) member(withAssignedAt bool) cgMemberRead {
	m, t := r.memberWithTarget(withAssignedAt)
	return cgMemberRead{m, t}
}

// memberWithTarget reads what cgWriter.member writes; withAssignedAt is
// false for version 1 snapshots, which had no assignment epochs.
func (r *cgReader) memberWithTarget(withAssignedAt bool) (*cgMember, assignment) {
	m := &cgMember{}
	m.id = r.str()
	m.instanceID = r.nstr()
	m.rackID = r.nstr()
	m.clientID = r.str()
	m.clientHost = r.str()
	m.subscribedNames = r.strs()
	m.subscribedRegex = r.nstr()
	m.serverAssignor = r.nstr()
	m.rebalanceTimeout = ms(r.i32())
	m.epoch = r.i32()
	m.prevEpoch = r.i32()
	if st := r.take(1); st != nil {
		m.state = memberState(st[0])
	}
	m.resolved = r.strs()
	m.assigned = r.asg()
	m.pendingRevoke = r.asg()
	target := r.asg()
	if withAssignedAt {
		// Each entry is 24 bytes; count checks 4 of them.
		n := r.count()
		m.assignedAt = make(map[partKey]int32, n)
		for j := 0; j < n && r.err == nil; j++ {
			k := partKey{topic: r.id()}
			k.partition = r.i32()
			m.assignedAt[k] = r.i32()
		}
	}
	m.syncAssignedAt()
	return m, target
}

// putMember places a decoded member (and its target) in the group; the
// caller rebuilds the indexes once all are in.
func (c *consumerGroup) putMember(mr cgMemberRead) {
	m := mr.m
	if old := c.members[m.id]; old != nil && old.instanceID != nil && c.static[*old.instanceID] == m.id {
		delete(c.static, *old.instanceID)
	}
	c.members[m.id] = m
	delete(c.target, m.id)
	if mr.target != nil {
		c.target[m.id] = mr.target
	}
	if m.instanceID != nil {
		c.static[*m.instanceID] = m.id
	}
}
