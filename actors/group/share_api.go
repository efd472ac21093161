package group

// The Manager's share-group methods and the listeners the share-partition
// side (actors/share, through the broker's wiring) hangs on membership.

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareHooks holds the share listeners. mu guards both; actors read them
// when a step's effects are delivered.
type shareHooks struct {
	mu           sync.Mutex
	memberGone   func(group, memberID string)
	groupDeleted func(group string)
}

// SetShareMemberListener sets fn to be told whenever a share group member
// leaves (heartbeat with epoch -1) or is expired (its session timed out):
// the member's acquired records are to be released. fn is called on a
// goroutine of its own, never on a group actor, so it may block or call
// back into the Manager; calls for different members are not ordered. A
// member that left on a coordinator that then lost leadership before
// persisting it is reported all the same (this coordinator no longer
// counts it). Set it before serving; nil removes it.
func (m *Manager) SetShareMemberListener(fn func(group, memberID string)) {
	m.share.mu.Lock()
	m.share.memberGone = fn
	m.share.mu.Unlock()
}

// SetShareGroupDeletedListener sets fn to be told when a share group was
// deleted (DeleteGroups of an empty share group), once the deletion is
// persisted: its share-partitions' state is to be dropped. Called as the
// member listener is.
func (m *Manager) SetShareGroupDeletedListener(fn func(group string)) {
	m.share.mu.Lock()
	m.share.groupDeleted = fn
	m.share.mu.Unlock()
}

// notifyShare tells the listeners what a step did; deleted counts only
// when the step's records were persisted.
func (m *Manager) notifyShare(group string, eff Effects, persisted bool) {
	if len(eff.ShareMembersGone) == 0 && !eff.ShareGroupDeleted {
		return
	}
	m.share.mu.Lock()
	gone, deleted := m.share.memberGone, m.share.groupDeleted
	m.share.mu.Unlock()
	if gone != nil {
		for _, id := range eff.ShareMembersGone {
			go gone(group, id)
		}
	}
	if deleted != nil && eff.ShareGroupDeleted && persisted {
		go deleted(group)
	}
}

// ShareGroupHeartbeat handles a KIP-932 ShareGroupHeartbeat; topics is
// read for the subscribed topics' ids and partition counts.
func (m *Manager) ShareGroupHeartbeat(req *kmsg.ShareGroupHeartbeatRequest, c Client, topics TopicSource, reply func(*kmsg.ShareGroupHeartbeatResponse)) {
	m.dispatch(req.GroupID, &opMsg{
		create: req.MemberEpoch == 0,
		do: func(g *Group, now time.Time, ref Ref) Effects {
			return g.ShareGroupHeartbeat(now, ref, req, c, topics)
		},
		reply: func(r kmsg.Response) { reply(r.(*kmsg.ShareGroupHeartbeatResponse)) },
		fail:  sghFail,
	})
}

// ShareGroupDescribe answers one group of a ShareGroupDescribe.
func (m *Manager) ShareGroupDescribe(group string, reply func(kmsg.ShareGroupDescribeResponseGroup)) {
	m.dispatch(group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.ShareGroupDescribe(now, ref) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.ShareGroupDescribeResponse).Groups[0]) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrShareGroupDescribeResponse()
			out := kmsg.NewShareGroupDescribeResponseGroup()
			out.GroupID, out.ErrorCode = group, code
			resp.Groups = []kmsg.ShareGroupDescribeResponseGroup{out}
			return resp
		},
	})
}

// ShareMember asks whether memberID is a current member of share group
// group. reply gets 0 (a member), UNKNOWN_MEMBER_ID (not a member),
// GROUP_ID_NOT_FOUND (no share group of that id, or a group of another
// type) or NOT_COORDINATOR (this manager is not serving: standby or
// closed). reply is called once, possibly before ShareMember returns; it
// must not block.
func (m *Manager) ShareMember(group, memberID string, reply func(errorCode int16)) {
	m.dispatchCode(group, false, func(g *Group, now time.Time, ref Ref) Effects {
		return g.ShareMemberStatus(now, ref, memberID)
	}, reply)
}

// ShareGroupEmpty reports through reply whether share group group exists
// with no members: 0 (empty), NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND (no
// such share group, or a group of another type), NOT_COORDINATOR (not
// serving). The share-offset admin APIs need an empty group to alter.
func (m *Manager) ShareGroupEmpty(group string, reply func(errorCode int16)) {
	m.dispatchCode(group, false, func(g *Group, now time.Time, ref Ref) Effects {
		resp := kmsg.NewPtrShareGroupHeartbeatResponse()
		switch {
		case g.sg == nil:
			resp.ErrorCode = kerr.GroupIDNotFound.Code
		case len(g.sg.members) > 0:
			resp.ErrorCode = kerr.NonEmptyGroup.Code
		}
		g.reply(ref, resp)
		return g.take()
	}, reply)
}

// EnsureShareGroup makes an empty share group when no group of that id
// exists, as Kafka's AlterShareGroupOffsets does. reply gets 0 (an empty
// share group, made durable before the answer if new), NON_EMPTY_GROUP
// (members), GROUP_ID_NOT_FOUND (a group of another type),
// INVALID_GROUP_ID (empty id) or NOT_COORDINATOR (not serving, or the
// write failed: whether the group was made is then unknown).
func (m *Manager) EnsureShareGroup(group string, reply func(errorCode int16)) {
	m.dispatchCode(group, true, func(g *Group, now time.Time, ref Ref) Effects {
		return g.EnsureShareGroup(now, ref)
	}, reply)
}

// dispatchCode runs do on group's actor for an operation whose answer is
// only an error code: do replies with a ShareGroupHeartbeatResponse
// carrying it, and a manager that cannot serve answers the same way.
func (m *Manager) dispatchCode(group string, create bool, do func(g *Group, now time.Time, ref Ref) Effects, reply func(errorCode int16)) {
	m.dispatch(group, &opMsg{
		create: create,
		do:     do,
		reply:  func(r kmsg.Response) { reply(r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode) },
		fail:   sghFail,
	})
}

// sghFail answers with code alone when the manager cannot serve.
func sghFail(code int16) kmsg.Response {
	resp := kmsg.NewPtrShareGroupHeartbeatResponse()
	resp.ErrorCode = code
	return resp
}
