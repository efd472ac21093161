package group

// The classic protocol's JoinGroup, following Kafka's GroupMetadataManager:
// new members (with the KIP-394 MEMBER_ID_REQUIRED handshake from v4),
// static members (KIP-345) and rejoining members; the join phase and its
// completion.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinError(memberID string, err *kerr.Error) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID = memberID
	resp.ErrorCode = err.Code
	resp.Generation = -1
	return resp
}

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

// Join handles a JoinGroup. The answer may come later (when the join phase
// ends), in the Effects of another step.
func (g *Group) Join(now time.Time, ref Ref, req *kmsg.JoinGroupRequest, client Client) Effects {
	g.join(now, ref, req, client)
	g.advance(now)
	return g.take()
}

func (g *Group) join(now time.Time, ref Ref, req *kmsg.JoinGroupRequest, client Client) {
	if req.Group == "" {
		g.reply(ref, joinError(req.MemberID, kerr.InvalidGroupID))
		return
	}
	session := ms(req.SessionTimeoutMillis)
	if session < g.cfg.MinSessionTimeout || session > g.cfg.MaxSessionTimeout {
		g.reply(ref, joinError(req.MemberID, kerr.InvalidSessionTimeout))
		return
	}
	if g.sg != nil || (g.st != nil && len(g.st.members) > 0) {
		// A share group (or a streams group with members) is no classic group: Kafka answers a JoinGroup
		// for a group of another protocol this way.
		g.reply(ref, joinError(req.MemberID, kerr.InconsistentGroupProtocol))
		return
	}
	if g.cg != nil {
		// A classic member may not join a consumer (KIP-848) group that
		// has members (Kafka's online upgrade path is not served).
		if len(g.cg.members) > 0 {
			g.reply(ref, joinError(req.MemberID, kerr.InconsistentGroupProtocol))
			return
		}
		// An empty consumer group becomes a classic one (its offsets
		// stay); its consumer-protocol state goes.
		g.cg = nil
		g.state = Empty
		g.record(Record{Kind: RecConsumerGroup, Group: g.id})
	}
	if g.st != nil {
		// An empty streams group becomes a classic one, as above.
		g.st = nil
		g.state = Empty
		g.record(Record{Kind: RecStreamsGroup, Group: g.id})
		g.record(Record{Kind: RecStreamsTopology, Group: g.id})
	}
	unknown := req.MemberID == ""
	created := false
	if !g.live {
		if !unknown {
			g.reply(ref, joinError(req.MemberID, kerr.UnknownMemberID))
			return
		}
		g.create(now)
		created = true
	}
	if !g.acceptJoiningMember(req.MemberID) {
		if m := g.members[req.MemberID]; m != nil {
			g.dropMember(m, now)
		}
		g.reply(ref, joinError("", kerr.GroupMaxSizeReached))
		return
	}
	if unknown {
		g.joinNew(now, ref, req, client)
	} else {
		g.joinExisting(now, ref, req, client)
	}
	if created && len(g.eff.Records) == 0 {
		// Kafka writes a new group's (empty) metadata so that it exists
		// across a restart even before its first rebalance ends.
		g.recordMeta(now)
	}
}

func (g *Group) acceptJoiningMember(memberID string) bool {
	switch g.state {
	case PreparingRebalance:
		if m := g.members[memberID]; m != nil && m.joinRef != 0 {
			return true
		}
		return g.awaitingJoin < g.cfg.MaxSize
	case CompletingRebalance, Stable:
		return g.members[memberID] != nil || len(g.members) < g.cfg.MaxSize
	}
	return true
}

// supportsProtocols: an empty group takes any non-empty protocol list; a
// group with members takes one of the same protocol type sharing a
// protocol with every member.
func (g *Group) supportsProtocols(ptype string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return ptype != "" && len(ps) > 0
	}
	if ptype != g.protocolType {
		return false
	}
	for _, p := range ps {
		all := true
		for _, m := range g.order {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (g *Group) joinNew(now time.Time, ref Ref, req *kmsg.JoinGroupRequest, client Client) {
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		g.reply(ref, joinError("", kerr.InconsistentGroupProtocol))
		return
	}
	prefix := client.ID
	if req.InstanceID != nil {
		prefix = *req.InstanceID
	}
	newID := g.cfg.NewMemberID(prefix)
	switch {
	case req.InstanceID != nil:
		if old, ok := g.static[*req.InstanceID]; ok {
			g.replaceStatic(now, ref, req, old, newID)
			return
		}
		g.addMember(now, ref, req, client, newID)
	case req.Version >= 4:
		// KIP-394: hand out the id and have the member come back with it,
		// so that a client retrying without an id cannot pile up members.
		if !g.addPending(newID, now.Add(ms(req.SessionTimeoutMillis))) {
			g.reply(ref, joinError("", kerr.CoordinatorNotAvailable))
			return
		}
		g.reply(ref, joinError(newID, kerr.MemberIDRequired))
	default:
		g.addMember(now, ref, req, client, newID)
	}
}

// validateMember is Kafka's ClassicGroup.validateMember.
func (g *Group) validateMember(memberID string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID
		}
		if existing != memberID {
			return kerr.FencedInstanceID
		}
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID
	}
	return nil
}

func (g *Group) joinExisting(now time.Time, ref Ref, req *kmsg.JoinGroupRequest, client Client) {
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		g.reply(ref, joinError(req.MemberID, kerr.InconsistentGroupProtocol))
		return
	}
	if _, ok := g.pending[req.MemberID]; ok {
		if req.InstanceID != nil {
			// Pending ids are only handed to dynamic members.
			g.reply(ref, joinError(req.MemberID, kerr.InvalidRequest))
			return
		}
		g.addMember(now, ref, req, client, req.MemberID)
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		g.reply(ref, joinError(req.MemberID, err))
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		g.updateMember(m, req, ref)
		g.maybePrepareRebalanceOrCompleteJoin(now)
	case CompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost the first response: answer it again.
			g.reply(ref, g.joinResponse(m, g.leader == m.id, g.leader, false))
			return
		}
		g.updateMember(m, req, ref)
		g.maybePrepareRebalanceOrCompleteJoin(now)
	case Stable:
		if g.leader == m.id || !m.matches(req.Protocols) {
			// A leader's rejoin forces a rebalance: that is how it asks
			// for one when topic metadata changes.
			g.updateMember(m, req, ref)
			g.maybePrepareRebalanceOrCompleteJoin(now)
			return
		}
		g.reply(ref, g.joinResponse(m, false, g.leader, false))
	default:
		g.reply(ref, joinError(req.MemberID, kerr.UnknownMemberID))
	}
}

// joinResponse is the successful answer for m at the current generation.
func (g *Group) joinResponse(m *member, withMembers bool, leader string, skip bool) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID = m.id
	resp.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType = &pt
	resp.Protocol = &p
	resp.LeaderID = leader
	resp.SkipAssignment = skip
	if withMembers {
		for _, o := range g.order {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = o.id
			jm.InstanceID = o.instanceID
			jm.ProtocolMetadata = o.metadataFor(g.protocol)
			resp.Members = append(resp.Members, jm)
		}
	}
	return resp
}

func (g *Group) addMember(now time.Time, ref Ref, req *kmsg.JoinGroupRequest, client Client, id string) {
	m := &member{
		id:               id,
		instanceID:       cloneStr(req.InstanceID),
		clientID:         client.ID,
		clientHost:       client.Host,
		protocolType:     req.ProtocolType,
		protocols:        protocolsOf(req.Protocols),
		sessionTimeout:   ms(req.SessionTimeoutMillis),
		rebalanceTimeout: rebalanceTimeoutOf(req),
		joinRef:          ref,
		isNew:            true,
		// New members can't heartbeat, and a disconnect goes unseen while
		// the JoinGroup waits; bound the wait instead.
		deadline: now.Add(g.cfg.NewMemberJoinTimeout),
	}
	if g.state == PreparingRebalance && g.prevState == Empty {
		g.newMemberAdded = true
	}
	g.addToGroup(m)
	g.maybePrepareRebalanceOrCompleteJoin(now)
}

func rebalanceTimeoutOf(req *kmsg.JoinGroupRequest) time.Duration {
	if req.Version == 0 || req.RebalanceTimeoutMillis <= 0 {
		// v0 has no rebalance timeout: Kafka uses the session timeout.
		return ms(req.SessionTimeoutMillis)
	}
	return ms(req.RebalanceTimeoutMillis)
}

func cloneStr(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// updateMember takes a rejoining member's new protocols and timeouts and
// parks its JoinGroup.
func (g *Group) updateMember(m *member, req *kmsg.JoinGroupRequest, ref Ref) {
	m.protocols = protocolsOf(req.Protocols)
	m.sessionTimeout = ms(req.SessionTimeoutMillis)
	m.rebalanceTimeout = rebalanceTimeoutOf(req)
	if m.joinRef != 0 {
		// Kafka silently replaces the old future; answer it so that its
		// connection is not left waiting.
		g.reply(m.joinRef, joinError(m.id, kerr.RebalanceInProgress))
		g.awaitingJoin--
	}
	m.joinRef = ref
	if ref != 0 {
		g.awaitingJoin++
	}
}

// replaceStatic gives a known instance id's member a new member id
// (KIP-345): the old id is fenced; no rebalance happens when the group is
// stable and the selected protocol would not change.
func (g *Group) replaceStatic(now time.Time, ref Ref, req *kmsg.JoinGroupRequest, oldID, newID string) {
	currentLeader := g.leader
	old := g.members[oldID]
	fence := joinError(oldID, kerr.FencedInstanceID)
	if old.joinRef != 0 {
		g.reply(old.joinRef, fence)
		old.joinRef = 0
		g.awaitingJoin--
	}
	if old.syncRef != 0 {
		g.reply(old.syncRef, syncError(kerr.FencedInstanceID))
		old.syncRef = 0
	}
	// The member keeps its place, assignment and timeouts under the new id.
	delete(g.members, oldID)
	old.id = newID
	old.isNew = false
	g.members[newID] = old
	g.static[*req.InstanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	m := old
	m.deadline = now.Add(m.sessionTimeout)
	g.updateMember(m, req, ref)

	switch g.state {
	case Stable:
		if g.selectProtocol() == g.protocol {
			// Persist the new member id, then answer without a rebalance.
			// Before v9 the leader id returned is the old one, so that a
			// returning leader does not assign (its assignment could not
			// be sent to a stable group); v9+ says so with SkipAssignment.
			g.recordMetaWithAssignment(now)
			m.joinRef = 0
			g.awaitingJoin--
			if req.Version >= 9 {
				isLeader := g.leader == newID
				g.reply(ref, g.joinResponse(m, isLeader, g.leader, isLeader))
			} else {
				g.reply(ref, g.joinResponse(m, false, currentLeader, false))
			}
			return
		}
		g.maybePrepareRebalanceOrCompleteJoin(now)
	case CompletingRebalance:
		// The leader may have been handed the old id: rebalance so that
		// the new id gets an assignment.
		g.prepareRebalance(now)
	default:
		g.maybeCompleteJoinPhase(now)
	}
}

func (g *Group) canRebalance() bool {
	return g.state == Stable || g.state == CompletingRebalance || g.state == Empty
}

func (g *Group) maybePrepareRebalanceOrCompleteJoin(now time.Time) {
	if g.canRebalance() {
		g.prepareRebalance(now)
		return
	}
	g.maybeCompleteJoinPhase(now)
}

// maybeCompleteJoinPhase ends the join phase early once everyone has
// joined, except in the delayed first rebalance.
func (g *Group) maybeCompleteJoinPhase(now time.Time) {
	if g.state == PreparingRebalance && g.allJoined() && g.prevState != Empty {
		g.completeJoin(now)
	}
}

func (g *Group) prepareRebalance(now time.Time) {
	if g.state == CompletingRebalance {
		g.resetAndPropagateAssignmentError(kerr.RebalanceInProgress)
	}
	g.pendingSync = map[string]struct{}{}
	g.syncDeadline = time.Time{}

	initial := g.state == Empty
	g.transition(PreparingRebalance, now)
	if initial {
		g.initialPhase = true
		g.newMemberAdded = false
		g.initialDelay = g.cfg.InitialRebalanceDelay
		g.initialRemaining = max(g.rebalanceTimeout()-g.cfg.InitialRebalanceDelay, 0)
		g.joinDeadline = now.Add(g.initialDelay)
		return
	}
	g.initialPhase = false
	if g.allJoined() {
		g.completeJoin(now)
		return
	}
	g.joinDeadline = now.Add(g.rebalanceTimeout())
}

func (g *Group) onJoinDeadline(now time.Time) {
	if g.state != PreparingRebalance {
		return
	}
	if g.initialPhase && g.newMemberAdded && g.initialRemaining > 0 {
		// Someone joined during the delay: wait again, within the
		// rebalance timeout.
		g.newMemberAdded = false
		delay := min(g.cfg.InitialRebalanceDelay, g.initialRemaining)
		g.initialRemaining = max(g.initialRemaining-g.initialDelay, 0)
		g.initialDelay = delay
		g.joinDeadline = now.Add(delay)
		return
	}
	g.completeJoin(now)
}

// completeJoin ends the join phase: dynamic members that did not rejoin
// are dropped, the generation advances, and every waiting JoinGroup is
// answered (the leader's with the members' metadata).
func (g *Group) completeJoin(now time.Time) {
	g.joinDeadline = time.Time{}
	g.initialPhase = false
	for _, m := range append([]*member(nil), g.order...) {
		if m.joinRef == 0 && m.instanceID == nil {
			g.answerAndRemove(m, kerr.UnknownMemberID)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Nobody rejoined (only static members remain, silent): wait for
		// their sessions to end.
		g.joinDeadline = now.Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.pendingSync = map[string]struct{}{}
	if len(g.members) == 0 {
		g.protocol = ""
		g.computeSubscribed()
		g.transition(Empty, now)
		g.recordMeta(now)
		return
	}
	g.protocol = g.selectProtocol()
	g.computeSubscribed()
	g.transition(CompletingRebalance, now)
	for _, m := range g.order {
		if m.joinRef != 0 {
			g.reply(m.joinRef, g.joinResponse(m, g.leader == m.id, g.leader, false))
			m.joinRef = 0
			g.awaitingJoin--
		}
		m.deadline = now.Add(m.sessionTimeout)
		m.isNew = false
		g.pendingSync[m.id] = struct{}{}
	}
	g.syncDeadline = now.Add(g.rebalanceTimeout())
}

// electJoinedLeader keeps the leader if it rejoined, else picks a member
// that did; false if no member rejoined.
func (g *Group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if g.members[g.leader].joinRef != 0 {
		return true
	}
	for _, m := range g.order {
		if m.joinRef != 0 {
			g.leader = m.id
			return true
		}
	}
	return false
}

// selectProtocol picks, among the protocols every member supports, the one
// most members list first; ties go to the leader's preference.
func (g *Group) selectProtocol() string {
	candidates := map[string]bool{}
	if len(g.order) == 0 {
		return ""
	}
	for _, p := range g.order[0].protocols {
		candidates[p.name] = true
	}
	for _, m := range g.order[1:] {
		for name := range candidates {
			if !m.supports(name) {
				delete(candidates, name)
			}
		}
	}
	votes := map[string]int{}
	for _, m := range g.order {
		for _, p := range m.protocols {
			if candidates[p.name] {
				votes[p.name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	var pref []protocol
	if l := g.members[g.leader]; l != nil {
		pref = l.protocols
	} else {
		pref = g.order[0].protocols
	}
	for _, p := range pref {
		if candidates[p.name] && votes[p.name] > bestVotes {
			best, bestVotes = p.name, votes[p.name]
		}
	}
	return best
}

// computeSubscribed parses consumer-protocol members' subscriptions, for
// OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC and offset expiry.
func (g *Group) computeSubscribed() {
	g.subscribed, g.subscribedKnown = nil, false
	if g.protocolType != "consumer" || g.protocol == "" {
		g.subscribedKnown = len(g.members) == 0
		return
	}
	topics := map[string]struct{}{}
	for _, m := range g.order {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return
		}
		for _, t := range md.Topics {
			topics[t] = struct{}{}
		}
	}
	g.subscribed, g.subscribedKnown = topics, true
}

// isSubscribed: whether the group consumes topic; when subscriptions are
// unknown, a consumer-protocol group is assumed to.
func (g *Group) isSubscribed(topic string) bool {
	if g.st != nil {
		return g.st.subscribes(topic)
	}
	if g.cg != nil {
		return g.cg.subscribes(topic)
	}
	if g.sg != nil {
		return false
	}
	if !g.subscribedKnown {
		return g.protocolType == "consumer"
	}
	_, ok := g.subscribed[topic]
	return ok
}
