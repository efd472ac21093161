package group

// KIP-932 share groups (ShareGroupHeartbeat), following Kafka's
// GroupMetadataManager: members choose their ids and join with epoch 0,
// the group epoch moves when membership, subscriptions or the subscribed
// topics change, the share assignor (share_assign.go) computes the target
// assignment at once, and a member takes its target on its next
// heartbeat. Share-partitions are not owned exclusively, so there is no
// revocation phase: a member's epoch jumps to the assignment epoch.
//
// A share group lives in the same id namespace as classic and consumer
// groups; a group of another type is refused with GROUP_ID_NOT_FOUND
// ("Group X is not a share group."), and those protocols refuse a share
// group in turn.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareAssignorName is what ShareGroupDescribe reports as the assignor.
const shareAssignorName = "simple"

// maxShareMemberID is Kafka's bound on a share member id (a UUID string).
const maxShareMemberID = 36

type shareMember struct {
	id         string
	rackID     *string
	clientID   string
	clientHost string
	subscribed []string // sorted, unique; topic names as sent
	epoch      int32
	// prevEpoch is the epoch before the last move: a heartbeat with it
	// is accepted (the answer that moved the member on was lost).
	prevEpoch int32
	// assigned is what the member was last told (its target as of its
	// last heartbeat).
	assigned assignment

	sessionDeadline time.Time // zero only in a decoded snapshot
}

// shareGroup is a share group's state, owned by the group's actor (through
// Group.sg).
//
// Invariants: assignmentEpoch == epoch after every step (the target is
// recomputed whenever the epoch moves); every member's epoch is at most
// the group epoch; target has an entry only for members.
type shareGroup struct {
	epoch           int32
	assignmentEpoch int32
	members         map[string]*shareMember
	target          map[string]assignment
	// topics is the subscription metadata: every subscribed topic that
	// exists, with its id and partition count.
	topics map[string]topicMeta
	dirty  bool // something persisted changed in this step
}

func newShareGroup() *shareGroup {
	return &shareGroup{
		members: map[string]*shareMember{},
		target:  map[string]assignment{},
		topics:  map[string]topicMeta{},
	}
}

// state is Kafka's ShareGroupState: Empty or Stable (Dead is a deleted
// group, which has no state here).
func (s *shareGroup) state() State {
	if len(s.members) == 0 {
		return Empty
	}
	return Stable
}

func (s *shareGroup) sortedMembers() []string {
	ids := make([]string, 0, len(s.members))
	for id := range s.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (s *shareGroup) nextDeadline() time.Time {
	var next time.Time
	for _, m := range s.members {
		if t := m.sessionDeadline; !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// advance expires members whose session ended.
func (s *shareGroup) advance(g *Group, now time.Time) {
	for _, id := range s.sortedMembers() {
		m := s.members[id]
		if !m.sessionDeadline.IsZero() && !now.Before(m.sessionDeadline) {
			g.removeShareMember(m)
		}
	}
	g.recordSG()
}

// removeShareMember drops a member (left, expired): the group epoch moves
// and the others are given its partitions at their next heartbeat.
func (g *Group) removeShareMember(m *shareMember) {
	s := g.sg
	delete(s.members, m.id)
	delete(s.target, m.id)
	s.epoch++
	s.computeTarget()
	g.eff.ShareMembersGone = append(g.eff.ShareMembersGone, m.id)
}

// computeTarget runs the share assignor for the current group epoch.
func (s *shareGroup) computeTarget() {
	ids := s.sortedMembers()
	subs := make(map[string][]string, len(ids))
	for _, id := range ids {
		subs[id] = s.members[id].subscribed
	}
	s.target = assignShare(ids, subs, s.topics, s.target)
	s.assignmentEpoch = s.epoch
	s.dirty = true
}

func sgError(err *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.ErrorCode = err.Code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// blank is Kafka's test for an empty string field: nothing left once
// Java's trim removed every character at or below a space.
func blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) == ""
}

// validateShareHeartbeat is Kafka's request validation (KafkaApis'
// member id check, then throwIfShareGroupHeartbeatRequestIsInvalid); nil
// if valid.
func validateShareHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) *kmsg.ShareGroupHeartbeatResponse {
	bad := func(msg string) *kmsg.ShareGroupHeartbeatResponse { return sgError(kerr.InvalidRequest, msg) }
	switch {
	case req.MemberID == "" || len(req.MemberID) > maxShareMemberID:
		// Kafka answers this one without a message.
		return bad("")
	case blank(req.MemberID):
		return bad("MemberId can't be empty.")
	case blank(req.GroupID):
		return bad("GroupId can't be empty.")
	case req.RackID != nil && blank(*req.RackID):
		return bad("RackId can't be empty.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return bad("SubscribedTopicNames must be set in first request.")
	case req.MemberEpoch < leaveEpoch:
		return bad("MemberEpoch is invalid.")
	}
	return nil
}

// ShareGroupHeartbeat handles a KIP-932 heartbeat: join (epoch 0),
// heartbeat, or leave (-1). topics is read for the subscribed topics' ids
// and partition counts.
func (g *Group) ShareGroupHeartbeat(now time.Time, ref Ref, req *kmsg.ShareGroupHeartbeatRequest, client Client, topics TopicSource) Effects {
	resp := g.sgHeartbeat(now, req, client, topics)
	if resp.ErrorCode == 0 && req.MemberEpoch != leaveEpoch {
		resp.HeartbeatIntervalMillis = int32(g.shareHeartbeatInterval() / time.Millisecond)
	}
	g.reply(ref, resp)
	g.advance(now)
	g.recordSG()
	return g.take()
}

func (g *Group) sgHeartbeat(now time.Time, req *kmsg.ShareGroupHeartbeatRequest, client Client, topics TopicSource) *kmsg.ShareGroupHeartbeatResponse {
	if bad := validateShareHeartbeat(req); bad != nil {
		return bad
	}
	if g.sg == nil {
		switch {
		case g.live:
			return sgError(kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a share group.", g.id))
		case req.MemberEpoch == leaveEpoch:
			return sgError(kerr.GroupIDNotFound, fmt.Sprintf("Group %s not found.", g.id))
		case req.MemberEpoch != 0:
			return sgError(kerr.GroupIDNotFound, fmt.Sprintf("Share group %s not found.", g.id))
		}
		g.create(now)
		g.sg = newShareGroup()
		g.protocolType = "share"
		g.sg.dirty = true
	}
	s := g.sg
	m := s.members[req.MemberID]
	if req.MemberEpoch == leaveEpoch {
		if m == nil {
			return sgError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id))
		}
		g.removeShareMember(m)
		resp := kmsg.NewPtrShareGroupHeartbeatResponse()
		id := req.MemberID
		resp.MemberID = &id
		resp.MemberEpoch = leaveEpoch
		return resp
	}
	bump := false
	switch {
	case m == nil && req.MemberEpoch != 0:
		return sgError(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id))
	case m == nil:
		if len(s.members) >= g.cfg.ShareMaxSize {
			return sgError(kerr.GroupMaxSizeReached, fmt.Sprintf("The share group has reached its maximum capacity of %d members.", g.cfg.ShareMaxSize))
		}
		m = &shareMember{id: req.MemberID}
		s.members[m.id] = m
		bump = true
	case req.MemberEpoch > m.epoch:
		return sgError(kerr.FencedMemberEpoch, fmt.Sprintf("The share group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch))
	case req.MemberEpoch != 0 && req.MemberEpoch < m.epoch && req.MemberEpoch != m.prevEpoch:
		return sgError(kerr.FencedMemberEpoch, fmt.Sprintf("The share group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, m.epoch))
	}
	// Epoch 0 from a known member: it rejoins in place (a client that lost
	// its state) and is sent its whole assignment again.
	if g.updateShareMember(m, req, client) {
		bump = true
	}
	if topics != nil && g.refreshShareTopics(topics) {
		bump = true
	}
	if bump {
		s.epoch++
		s.computeTarget()
	}
	before := m.assigned
	if m.epoch != s.assignmentEpoch || req.MemberEpoch == 0 {
		if m.epoch != s.assignmentEpoch {
			m.prevEpoch = m.epoch
			s.dirty = true
		}
		m.epoch = s.assignmentEpoch
		m.assigned = s.target[m.id].clone()
		if !before.equal(m.assigned) {
			s.dirty = true
		}
	}
	m.sessionDeadline = now.Add(g.shareSessionTimeout())

	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	id := m.id
	resp.MemberID = &id
	resp.MemberEpoch = m.epoch
	// A member behind (its last answer lost) is sent its assignment again.
	if req.MemberEpoch != m.epoch || !before.equal(m.assigned) {
		resp.Assignment = &kmsg.ShareGroupHeartbeatResponseAssignment{TopicPartitions: []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}}
		for _, t := range topicsOf(m.assigned) {
			resp.Assignment.TopicPartitions = append(resp.Assignment.TopicPartitions,
				kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{TopicID: t, Partitions: slices.Clone(m.assigned[t])})
		}
	}
	return resp
}

// updateShareMember takes the request's fields (null: unchanged); true if
// the subscription changed.
func (g *Group) updateShareMember(m *shareMember, req *kmsg.ShareGroupHeartbeatRequest, client Client) bool {
	s := g.sg
	if req.RackID != nil && (m.rackID == nil || *m.rackID != *req.RackID) {
		m.rackID = cloneStr(req.RackID)
		s.dirty = true
	}
	if m.clientID != client.ID || m.clientHost != client.Host {
		m.clientID, m.clientHost = client.ID, client.Host
		s.dirty = true
	}
	if req.SubscribedTopicNames == nil {
		return false
	}
	names := slices.Clone(req.SubscribedTopicNames)
	sort.Strings(names)
	names = slices.Compact(names)
	if slices.Equal(names, m.subscribed) {
		return false
	}
	m.subscribed = names
	s.dirty = true
	return true
}

// refreshShareTopics resolves the members' subscriptions against the
// broker's topics; true if the subscription metadata (topics, ids,
// partition counts) changed, which moves the group epoch.
func (g *Group) refreshShareTopics(src TopicSource) bool {
	s := g.sg
	topics := map[string]topicMeta{}
	for _, m := range s.members {
		for _, n := range m.subscribed {
			if _, seen := topics[n]; seen {
				continue
			}
			if id, parts, ok := src.Topic(n); ok {
				topics[n] = topicMeta{name: n, id: id, partitions: parts}
			}
		}
	}
	if len(topics) == len(s.topics) {
		same := true
		for n, t := range topics {
			if s.topics[n] != t {
				same = false
				break
			}
		}
		if same {
			return false
		}
	}
	s.topics = topics
	s.dirty = true
	return true
}

// recordSG persists the share group's state if the step changed it.
func (g *Group) recordSG() {
	if g.sg == nil || !g.sg.dirty {
		return
	}
	g.sg.dirty = false
	g.record(Record{Kind: RecShareGroup, Group: g.id, SG: &sgSnapshot{raw: g.sg.encode()}})
}

// restoreShareGroup makes the group the persisted share group; members'
// sessions start again at now, as Kafka's do when a coordinator loads.
func (g *Group) restoreShareGroup(snap *sgSnapshot, now time.Time) {
	s, err := decodeShareGroup(snap.raw)
	if err != nil {
		// readSGSnapshot validated it; a failure here is a bug.
		panic(fmt.Sprintf("share group %s: %v", g.id, err))
	}
	for _, m := range s.members {
		m.sessionDeadline = now.Add(g.shareSessionTimeout())
	}
	g.live = true
	g.sg = s
	g.protocolType = "share"
	g.state = Empty
	g.stateSince = now
}

// ShareGroupDescribe answers one group of a ShareGroupDescribe (the shell
// fills AuthorizedOperations).
func (g *Group) ShareGroupDescribe(now time.Time, ref Ref) Effects {
	resp := kmsg.NewPtrShareGroupDescribeResponse()
	out := kmsg.NewShareGroupDescribeResponseGroup()
	out.GroupID = g.id
	switch {
	case g.sg == nil:
		out.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s not found.", g.id)
		if g.live {
			msg = fmt.Sprintf("Group %s is not a share group.", g.id)
		}
		out.ErrorMessage = &msg
	default:
		s := g.sg
		out.GroupState = s.state().String()
		out.GroupEpoch = s.epoch
		out.AssignmentEpoch = s.assignmentEpoch
		out.Assignor = shareAssignorName
		names := map[[16]byte]string{}
		for _, t := range s.topics {
			names[t.id] = t.name
		}
		out.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
		for _, id := range s.sortedMembers() {
			m := s.members[id]
			dm := kmsg.NewShareGroupDescribeResponseGroupMember()
			dm.MemberID, dm.RackID, dm.MemberEpoch = m.id, m.rackID, m.epoch
			dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
			dm.SubscribedTopicNames = slices.Clone(m.subscribed)
			if dm.SubscribedTopicNames == nil {
				dm.SubscribedTopicNames = []string{}
			}
			dm.Assignment.TopicPartitions = []kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{}
			for _, t := range topicsOf(m.assigned) {
				dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions,
					kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{TopicID: t, Topic: names[t], Partitions: slices.Clone(m.assigned[t])})
			}
			out.Members = append(out.Members, dm)
		}
	}
	resp.Groups = []kmsg.ShareGroupDescribeResponseGroup{out}
	g.reply(ref, resp)
	return g.take()
}

// ShareMemberStatus answers whether memberID is a member of this share
// group: 0, UNKNOWN_MEMBER_ID, or GROUP_ID_NOT_FOUND (no such share
// group). The answer is a ShareGroupHeartbeatResponse carrying the code.
func (g *Group) ShareMemberStatus(now time.Time, ref Ref, memberID string) Effects {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	switch {
	case g.sg == nil:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case g.sg.members[memberID] == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	default:
		resp.MemberEpoch = g.sg.members[memberID].epoch
	}
	g.reply(ref, resp)
	return g.take()
}

// shareSessionTimeout is the group's share.session.timeout.ms config when
// set, else the broker's group.share.session.timeout.ms; read at each
// heartbeat, so a change applies from a member's next heartbeat.
func (g *Group) shareSessionTimeout() time.Duration {
	if g.cfg.GroupShareTimeouts != nil {
		if s, _ := g.cfg.GroupShareTimeouts(g.id); s > 0 {
			return s
		}
	}
	return g.cfg.ShareSessionTimeout
}

// shareHeartbeatInterval is the group's share.heartbeat.interval.ms config
// when set, else the broker's group.share.heartbeat.interval.ms.
func (g *Group) shareHeartbeatInterval() time.Duration {
	if g.cfg.GroupShareTimeouts != nil {
		if _, h := g.cfg.GroupShareTimeouts(g.id); h > 0 {
			return h
		}
	}
	return g.cfg.ShareHeartbeatInterval
}

// EnsureShareGroup makes an empty share group of this id if no group has
// it, as Kafka's AlterShareGroupOffsets does for a group that does not
// exist. The answer (a ShareGroupHeartbeatResponse carrying the code) is
// 0 for an empty share group (new or not), NON_EMPTY_GROUP for one with
// members, GROUP_ID_NOT_FOUND for a group of another type.
func (g *Group) EnsureShareGroup(now time.Time, ref Ref) Effects {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	switch {
	case g.sg != nil && len(g.sg.members) > 0:
		resp.ErrorCode = kerr.NonEmptyGroup.Code
	case g.sg != nil:
	case g.live:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		msg := fmt.Sprintf("Group %s is not a share group.", g.id)
		resp.ErrorMessage = &msg
	case g.id == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	default:
		g.create(now)
		g.sg = newShareGroup()
		g.protocolType = "share"
		g.sg.dirty = true
		g.recordSG()
	}
	g.reply(ref, resp)
	return g.take()
}
