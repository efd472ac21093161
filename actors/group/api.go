package group

// The Manager's request methods: one per group operation. Each routes to
// the group's actor and calls reply exactly once.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup handles a JoinGroup; the reply may wait for the join phase.
func (m *Manager) JoinGroup(req *kmsg.JoinGroupRequest, c Client, reply func(*kmsg.JoinGroupResponse)) {
	m.dispatch(req.Group, &opMsg{
		create: req.MemberID == "",
		do:     func(g *Group, now time.Time, ref Ref) Effects { return g.Join(now, ref, req, c) },
		reply:  func(r kmsg.Response) { reply(r.(*kmsg.JoinGroupResponse)) },
		fail: func(code int16) kmsg.Response {
			return joinError(req.MemberID, kerr.TypedErrorForCode(code))
		},
	})
}

// SyncGroup handles a SyncGroup; a follower's reply waits for the leader.
func (m *Manager) SyncGroup(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	m.dispatch(req.Group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.Sync(now, ref, req) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.SyncGroupResponse)) },
		fail:  func(code int16) kmsg.Response { return syncError(kerr.TypedErrorForCode(code)) },
	})
}

// Heartbeat handles a classic Heartbeat.
func (m *Manager) Heartbeat(req *kmsg.HeartbeatRequest, reply func(*kmsg.HeartbeatResponse)) {
	m.dispatch(req.Group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.Heartbeat(now, ref, req) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.HeartbeatResponse)) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrHeartbeatResponse()
			resp.ErrorCode = code
			return resp
		},
	})
}

// LeaveGroup handles a LeaveGroup in its v3+ form (Members set).
func (m *Manager) LeaveGroup(req *kmsg.LeaveGroupRequest, reply func(*kmsg.LeaveGroupResponse)) {
	m.dispatch(req.Group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.Leave(now, ref, req) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.LeaveGroupResponse)) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrLeaveGroupResponse()
			resp.ErrorCode = code
			return resp
		},
	})
}

// CommitOffsets handles an OffsetCommit whose topics exist (the caller
// answers unknown topics itself). Commits are durable when answered.
func (m *Manager) CommitOffsets(req *kmsg.OffsetCommitRequest, reply func(*kmsg.OffsetCommitResponse)) {
	m.dispatch(req.Group, &opMsg{
		create: req.Generation < 0,
		do:     func(g *Group, now time.Time, ref Ref) Effects { return g.CommitOffsets(now, ref, req) },
		reply:  func(r kmsg.Response) { reply(r.(*kmsg.OffsetCommitResponse)) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrOffsetCommitResponse()
			for _, rt := range req.Topics {
				ot := kmsg.NewOffsetCommitResponseTopic()
				ot.Topic, ot.TopicID = rt.Topic, rt.TopicID
				for _, rp := range rt.Partitions {
					op := kmsg.NewOffsetCommitResponseTopicPartition()
					op.Partition, op.ErrorCode = rp.Partition, code
					ot.Partitions = append(ot.Partitions, op)
				}
				resp.Topics = append(resp.Topics, ot)
			}
			return resp
		},
	})
}

// FetchOffsets answers one group's part of an OffsetFetch.
func (m *Manager) FetchOffsets(group string, q FetchQuery, reply func(kmsg.OffsetFetchResponseGroup)) {
	m.dispatch(group, &opMsg{
		do: func(g *Group, now time.Time, ref Ref) Effects { return g.FetchOffsets(now, ref, q) },
		reply: func(r kmsg.Response) {
			reply(r.(*kmsg.OffsetFetchResponse).Groups[0])
		},
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrOffsetFetchResponse()
			out := kmsg.NewOffsetFetchResponseGroup()
			out.Group, out.ErrorCode = group, code
			resp.Groups = []kmsg.OffsetFetchResponseGroup{out}
			return resp
		},
	})
}

// DeleteOffsets handles an OffsetDelete whose topics exist.
func (m *Manager) DeleteOffsets(req *kmsg.OffsetDeleteRequest, reply func(*kmsg.OffsetDeleteResponse)) {
	m.dispatch(req.Group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.DeleteOffsets(now, ref, req) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.OffsetDeleteResponse)) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrOffsetDeleteResponse()
			resp.ErrorCode = code
			return resp
		},
	})
}

// DescribeGroup answers one group of a DescribeGroups (v6 semantics: a
// missing group is GROUP_ID_NOT_FOUND).
func (m *Manager) DescribeGroup(group string, reply func(kmsg.DescribeGroupsResponseGroup)) {
	m.dispatch(group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.Describe(now, ref) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.DescribeGroupsResponse).Groups[0]) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrDescribeGroupsResponse()
			out := kmsg.NewDescribeGroupsResponseGroup()
			out.Group, out.ErrorCode = group, code
			resp.Groups = []kmsg.DescribeGroupsResponseGroup{out}
			return resp
		},
	})
}

// DeleteGroup deletes an empty group and its offsets.
func (m *Manager) DeleteGroup(group string, reply func(kmsg.DeleteGroupsResponseGroup)) {
	m.dispatch(group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.Delete(now, ref) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.DeleteGroupsResponse).Groups[0]) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrDeleteGroupsResponse()
			out := kmsg.NewDeleteGroupsResponseGroup()
			out.Group, out.ErrorCode = group, code
			resp.Groups = []kmsg.DeleteGroupsResponseGroup{out}
			return resp
		},
	})
}

// ConsumerGroupHeartbeat handles a KIP-848 ConsumerGroupHeartbeat; topics
// is read for the subscribed topics' ids and partition counts.
func (m *Manager) ConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, c Client, topics TopicSource, reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	m.dispatch(req.Group, &opMsg{
		create: req.MemberEpoch == 0,
		do: func(g *Group, now time.Time, ref Ref) Effects {
			return g.ConsumerGroupHeartbeat(now, ref, req, c, topics)
		},
		reply: func(r kmsg.Response) { reply(r.(*kmsg.ConsumerGroupHeartbeatResponse)) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			resp.ErrorCode = code
			return resp
		},
	})
}

// ConsumerGroupDescribe answers one group of a ConsumerGroupDescribe.
func (m *Manager) ConsumerGroupDescribe(group string, reply func(kmsg.ConsumerGroupDescribeResponseGroup)) {
	m.dispatch(group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.ConsumerGroupDescribe(now, ref) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrConsumerGroupDescribeResponse()
			out := kmsg.NewConsumerGroupDescribeResponseGroup()
			out.Group, out.ErrorCode = group, code
			resp.Groups = []kmsg.ConsumerGroupDescribeResponseGroup{out}
			return resp
		},
	})
}

// TxnCommitOffsets stages a TxnOffsetCommit's offsets under its producer
// id (the caller checked the producer's epoch and that the topics exist);
// CompleteTxn makes them committed or drops them.
func (m *Manager) TxnCommitOffsets(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse)) {
	m.dispatch(req.Group, &opMsg{
		create: true,
		do:     func(g *Group, now time.Time, ref Ref) Effects { return g.TxnCommitOffsets(now, ref, req) },
		reply:  func(r kmsg.Response) { reply(r.(*kmsg.TxnOffsetCommitResponse)) },
		fail:   func(code int16) kmsg.Response { return TxnOffsetsAnswer(req, code) },
	})
}

// CompleteTxn commits (or, with commit false, aborts) the offsets that
// producerID staged in group: the transaction coordinator's marker. done
// gets nil once the outcome is durable; it may be called again safely
// (after a restart the staged offsets are still pending until it is).
func (m *Manager) CompleteTxn(group string, producerID int64, commit bool, done func(error)) {
	// Counted and sent under the guard's lock: a staging checked before
	// this completion is either sent ahead of it or refused.
	m.txnEnds.Lock()
	defer m.txnEnds.Unlock()
	m.txnEnds.bump(producerID)
	m.dispatch(group, &opMsg{
		do: func(g *Group, now time.Time, ref Ref) Effects { return g.CompleteTxn(now, ref, producerID, commit) },
		reply: func(r kmsg.Response) {
			done(kerr.ErrorForCode(r.(*kmsg.EndTxnResponse).ErrorCode))
		},
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrEndTxnResponse()
			resp.ErrorCode = code
			return resp
		},
	})
}

// StreamsGroupHeartbeat handles a KIP-1071 StreamsGroupHeartbeat; topics
// is read for the topology's topics. The reply carries the internal topics
// the caller should create.
func (m *Manager) StreamsGroupHeartbeat(req *kmsg.StreamsGroupHeartbeatRequest, c Client, topics TopicSource, reply func(*kmsg.StreamsGroupHeartbeatResponse, []StreamsTopicToCreate)) {
	m.dispatch(req.Group, &opMsg{
		create: req.MemberEpoch == 0,
		do: func(g *Group, now time.Time, ref Ref) Effects {
			return g.StreamsGroupHeartbeat(now, ref, req, c, topics)
		},
		reply: func(r kmsg.Response) {
			switch r := r.(type) {
			case *StreamsReply:
				reply(r.StreamsGroupHeartbeatResponse, r.Create)
			default:
				reply(r.(*kmsg.StreamsGroupHeartbeatResponse), nil)
			}
		},
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrStreamsGroupHeartbeatResponse()
			resp.ErrorCode = code
			return resp
		},
	})
}

// StreamsGroupDescribe answers one group of a StreamsGroupDescribe.
func (m *Manager) StreamsGroupDescribe(group string, reply func(kmsg.StreamsGroupDescribeResponseGroup)) {
	m.dispatch(group, &opMsg{
		do:    func(g *Group, now time.Time, ref Ref) Effects { return g.StreamsGroupDescribe(now, ref) },
		reply: func(r kmsg.Response) { reply(r.(*kmsg.StreamsGroupDescribeResponse).Groups[0]) },
		fail: func(code int16) kmsg.Response {
			resp := kmsg.NewPtrStreamsGroupDescribeResponse()
			out := kmsg.NewStreamsGroupDescribeResponseGroup()
			out.Group, out.ErrorCode = group, code
			resp.Groups = []kmsg.StreamsGroupDescribeResponseGroup{out}
			return resp
		},
	})
}
