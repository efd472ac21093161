package group

// SyncGroup, Heartbeat, LeaveGroup and the expiries of the classic
// protocol.

import (
	"bytes"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func syncError(err *kerr.Error) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode = err.Code
	resp.MemberAssignment = []byte{}
	return resp
}

func (g *Group) syncResponse(m *member) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

// Sync handles a SyncGroup; in CompletingRebalance the answer waits for the
// leader's assignment.
func (g *Group) Sync(now time.Time, ref Ref, req *kmsg.SyncGroupRequest) Effects {
	g.sync(now, ref, req)
	g.advance(now)
	return g.take()
}

func (g *Group) sync(now time.Time, ref Ref, req *kmsg.SyncGroupRequest) {
	if !g.live || g.cg != nil || g.sg != nil || g.st != nil {
		g.reply(ref, syncError(kerr.UnknownMemberID))
		return
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		g.reply(ref, syncError(err))
		return
	}
	if req.Generation != g.generation {
		g.reply(ref, syncError(kerr.IllegalGeneration))
		return
	}
	if inconsistent(req.ProtocolType, g.protocolType) || inconsistent(req.Protocol, g.protocol) {
		g.reply(ref, syncError(kerr.InconsistentGroupProtocol))
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		g.reply(ref, syncError(kerr.UnknownMemberID))
	case PreparingRebalance:
		g.reply(ref, syncError(kerr.RebalanceInProgress))
	case CompletingRebalance:
		if m.syncRef != 0 {
			g.reply(m.syncRef, syncError(kerr.RebalanceInProgress))
		}
		m.syncRef = ref
		g.syncReceived(m.id)
		if g.leader != m.id {
			return
		}
		assigned := make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			assigned[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
		for _, o := range g.order {
			o.assignment = assigned[o.id]
		}
		g.recordMetaWithAssignment(now)
		g.transition(Stable, now)
		for _, o := range g.order {
			if o.syncRef != 0 {
				g.reply(o.syncRef, g.syncResponse(o))
				o.syncRef = 0
				o.deadline = now.Add(o.sessionTimeout)
			}
		}
	case Stable:
		g.syncReceived(m.id)
		g.reply(ref, g.syncResponse(m))
		m.deadline = now.Add(m.sessionTimeout)
	}
}

// inconsistent: the request names a protocol (type) and it is not the
// group's.
func inconsistent(req *string, group string) bool {
	return req != nil && group != "" && *req != group
}

func (g *Group) syncReceived(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.syncDeadline = time.Time{}
	}
}

// resetAndPropagateAssignmentError clears assignments and answers every
// waiting SyncGroup with err.
func (g *Group) resetAndPropagateAssignmentError(err *kerr.Error) {
	for _, m := range g.order {
		m.assignment = nil
		if m.syncRef != 0 {
			g.reply(m.syncRef, syncError(err))
			m.syncRef = 0
		}
	}
}

// Heartbeat handles a classic Heartbeat.
func (g *Group) Heartbeat(now time.Time, ref Ref, req *kmsg.HeartbeatRequest) Effects {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.ErrorCode = g.heartbeat(now, req)
	g.reply(ref, resp)
	g.advance(now)
	return g.take()
}

func (g *Group) heartbeat(now time.Time, req *kmsg.HeartbeatRequest) int16 {
	if !g.live || g.cg != nil || g.sg != nil || g.st != nil {
		return kerr.UnknownMemberID.Code
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err.Code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		m.deadline = now.Add(m.sessionTimeout)
		return kerr.RebalanceInProgress.Code
	case CompletingRebalance, Stable:
		m.deadline = now.Add(m.sessionTimeout)
		return 0
	}
	return kerr.UnknownMemberID.Code
}

// Leave handles a LeaveGroup in its v3+ form (the shell turns v0-v2's
// single member id into one member).
func (g *Group) Leave(now time.Time, ref Ref, req *kmsg.LeaveGroupRequest) Effects {
	resp := kmsg.NewPtrLeaveGroupResponse()
	left := 0
	for _, lm := range req.Members {
		out := kmsg.NewLeaveGroupResponseMember()
		out.MemberID, out.InstanceID = lm.MemberID, lm.InstanceID
		out.ErrorCode = g.leaveOne(now, lm)
		if out.ErrorCode == 0 {
			left++
		}
		resp.Members = append(resp.Members, out)
	}
	if left > 0 && g.cg == nil && g.sg == nil && g.st == nil {
		switch g.state {
		case Stable, CompletingRebalance:
			g.maybePrepareRebalanceOrCompleteJoin(now)
		case PreparingRebalance:
			g.maybeCompleteJoinPhase(now)
		}
	}
	g.reply(ref, resp)
	g.advance(now)
	return g.take()
}

func (g *Group) leaveOne(now time.Time, lm kmsg.LeaveGroupRequestMember) int16 {
	if !g.live || g.cg != nil || g.sg != nil || g.st != nil {
		return kerr.UnknownMemberID.Code
	}
	if lm.MemberID == "" {
		// Admin removal by instance id (kafka-consumer-groups, Streams).
		if lm.InstanceID != nil {
			if id, ok := g.static[*lm.InstanceID]; ok {
				g.answerAndRemove(g.members[id], kerr.UnknownMemberID)
				return 0
			}
		}
		return kerr.UnknownMemberID.Code
	}
	if _, ok := g.pending[lm.MemberID]; ok {
		g.dropPending(lm.MemberID)
		return 0
	}
	if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
		return err.Code
	}
	g.answerAndRemove(g.members[lm.MemberID], kerr.UnknownMemberID)
	return 0
}

// answerAndRemove answers whatever m is waiting on with err and drops it.
func (g *Group) answerAndRemove(m *member, err *kerr.Error) {
	if m.joinRef != 0 {
		g.reply(m.joinRef, joinError("", err))
		m.joinRef = 0
		g.awaitingJoin--
	}
	if m.syncRef != 0 {
		g.reply(m.syncRef, syncError(err))
		m.syncRef = 0
	}
	g.removeFromGroup(m.id)
}

// dropMember removes m and lets the group react (rebalance or finish the
// join phase), as a session expiry does.
func (g *Group) dropMember(m *member, now time.Time) {
	g.answerAndRemove(m, kerr.UnknownMemberID)
	switch g.state {
	case Stable, CompletingRebalance:
		g.maybePrepareRebalanceOrCompleteJoin(now)
	case PreparingRebalance:
		if g.allJoined() {
			g.completeJoin(now)
		}
	}
}

// expireSession runs when m's deadline passes without a heartbeat.
// Members waiting in a rebalance are not expired (except new ones, which
// are bounded by NewMemberJoinTimeout); their session restarts when the
// rebalance answers them.
func (g *Group) expireSession(m *member, now time.Time) {
	if !m.isNew && (m.joinRef != 0 || m.syncRef != 0) {
		return
	}
	g.dropMember(m, now)
}

func (g *Group) expirePending(id string, now time.Time) {
	g.dropPending(id)
	if g.state == PreparingRebalance && g.allJoined() {
		g.completeJoin(now)
	}
}

// onSyncDeadline drops members that did not SyncGroup within the
// rebalance timeout and rebalances.
func (g *Group) onSyncDeadline(now time.Time) {
	if g.state != CompletingRebalance && g.state != Stable {
		return
	}
	if len(g.pendingSync) == 0 {
		return
	}
	for _, m := range append([]*member(nil), g.order...) {
		if _, ok := g.pendingSync[m.id]; ok {
			g.answerAndRemove(m, kerr.UnknownMemberID)
		}
	}
	g.prepareRebalance(now)
}

// recordMeta persists the group's metadata without assignments (as Kafka
// does when a group becomes empty or is created).
func (g *Group) recordMeta(now time.Time) {
	g.record(Record{Kind: RecGroup, Group: g.id, Meta: g.metadataValue(now, false)})
}

// recordMetaWithAssignment persists the metadata with every member's
// subscription and assignment.
func (g *Group) recordMetaWithAssignment(now time.Time) {
	g.record(Record{Kind: RecGroup, Group: g.id, Meta: g.metadataValue(now, true)})
}

func (g *Group) metadataValue(now time.Time, withMembers bool) *kmsg.GroupMetadataValue {
	v := &kmsg.GroupMetadataValue{}
	v.Default()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = now.UnixMilli()
	if withMembers {
		for _, m := range g.order {
			vm := kmsg.NewGroupMetadataValueMember()
			vm.MemberID = m.id
			vm.InstanceID = m.instanceID
			vm.ClientID = m.clientID
			vm.ClientHost = m.clientHost
			vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
			vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
			vm.Subscription = m.metadataFor(g.protocol)
			vm.Assignment = m.assignment
			v.Members = append(v.Members, vm)
		}
	}
	return v
}

// restoreMeta loads persisted metadata: a group with members comes back
// Stable with each member supporting only the selected protocol, and every
// member must heartbeat within its session timeout (as after a Kafka
// coordinator failover).
func (g *Group) restoreMeta(v *kmsg.GroupMetadataValue, now time.Time) {
	g.live = true
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	g.protocol = ""
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	g.members = map[string]*member{}
	g.order = nil
	g.static = map[string]string{}
	g.leader = ""
	g.awaitingJoin = 0
	for _, vm := range v.Members {
		m := &member{
			id:               vm.MemberID,
			instanceID:       cloneStr(vm.InstanceID),
			clientID:         vm.ClientID,
			clientHost:       vm.ClientHost,
			protocolType:     v.ProtocolType,
			protocols:        []protocol{{name: g.protocol, metadata: bytes.Clone(vm.Subscription)}},
			sessionTimeout:   ms(vm.SessionTimeoutMillis),
			rebalanceTimeout: ms(vm.RebalanceTimeoutMillis),
			assignment:       bytes.Clone(vm.Assignment),
		}
		if vm.RebalanceTimeoutMillis <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		m.deadline = now.Add(m.sessionTimeout)
		g.addToGroup(m)
	}
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leader = *v.Leader
	}
	g.state = Empty
	if len(g.members) > 0 {
		g.state = Stable
	}
	g.stateSince = now
	if v.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	g.computeSubscribed()
}
