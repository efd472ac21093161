package protocol

// TxnOffsetCommit: versions 0-6. The transaction coordinator checks the
// producer (id, epoch) and that the group was added with AddOffsetsToTxn
// (v5, KIP-890 part 2: the group is added here instead); the group
// coordinator then holds the offsets pending until the transaction ends
// (checking generation and member, v3+). Partitions of unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION here. A fenced producer gets
// INVALID_PRODUCER_EPOCH (this API never took PRODUCER_FENCED).
//
// With coordinators spread over raft groups (coordinators.go) the group's
// coordinator serves it: a transaction coordinated on another node checks
// it there first (txn_offsets_remote.go); a node's own TxnOffsetCommit is
// that check.
//
// v6 (KIP-1319) names topics by id only, resolved here as OffsetCommit v10
// does (UNKNOWN_TOPIC_ID for an id that names no topic, ids in the answer);
// the group answers GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH where older
// versions got ILLEGAL_GENERATION. Kafka 4.3's Java producer stops at v5;
// franz-go sends v6 when every topic has an id.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(28, 0, 6, (*Server).txnOffsetCommit) }

func (s *Server) txnOffsetCommit(r *Request) {
	req := r.Msg.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	fwd := *req
	fwd.Topics = nil
	// targets are the codes the coordinator's answer fills, in the order
	// of fwd's partitions.
	var targets []*int16
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	var refuse int16
	switch {
	case req.TransactionalID == "":
		refuse = kerr.InvalidRequest.Code
	case req.Group == "":
		refuse = kerr.InvalidGroupID.Code
	case !s.authorized(r, acls.Write, acls.TransactionalID, req.TransactionalID):
		refuse = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.authorized(r, acls.Read, acls.Group, req.Group):
		refuse = kerr.GroupAuthorizationFailed.Code
	case s.txnsFor(req.TransactionalID) == nil:
		refuse = kerr.CoordinatorNotAvailable.Code
	case byNode(r):
		// A group coordinator on another node asks this one, the
		// transaction's coordinator, to check it (txn_offsets_remote.go).
		s.checkTxnOffsets(r, req, resp)
		return
	case s.coords != nil && !s.coordinatorView(req.Group).Serving():
		// Not the group's coordinator: nothing is checked or added.
		refuse = kerr.NotCoordinator.Code
	}
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewTxnOffsetCommitResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		t, found, unknownID := s.commitTopic(req.Version, 6, rt.Topic, rt.TopicID)
		name := rt.Topic
		if found {
			name = t.Name
		}
		out.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		var ft *kmsg.TxnOffsetCommitRequestTopic
		topicOK := refuse != 0 || unknownID || s.authorized(r, acls.Read, acls.Topic, name)
		for j, rp := range rt.Partitions {
			op := &out.Partitions[j]
			*op = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case refuse != 0:
				op.ErrorCode = refuse
				continue
			case unknownID:
				op.ErrorCode = kerr.UnknownTopicID.Code
				continue
			case !topicOK:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			case !found || !t.hasPartition(rp.Partition):
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if ft == nil {
				fwd.Topics = append(fwd.Topics, kmsg.TxnOffsetCommitRequestTopic{Topic: t.Name, TopicID: t.ID})
				ft = &fwd.Topics[len(fwd.Topics)-1]
			}
			ft.Partitions = append(ft.Partitions, rp)
			targets = append(targets, &op.ErrorCode)
		}
	}
	if len(targets) == 0 {
		r.Respond(resp)
		return
	}
	answer := func(gr *kmsg.TxnOffsetCommitResponse, err error) {
		if err != nil {
			code := txnErrorCode(err, false)
			for _, t := range targets {
				*t = code
			}
			r.Respond(resp)
			return
		}
		i := 0
		for _, gt := range gr.Topics {
			for _, gp := range gt.Partitions {
				if i < len(targets) {
					*targets[i] = gp.ErrorCode
				}
				i++
			}
		}
		r.Respond(resp)
	}
	if s.coords != nil && !s.coordinatorView(req.TransactionalID).Serving() {
		s.txnOffsetsCheckedRemotely(r, &fwd, answer)
		return
	}
	s.txnsFor(req.TransactionalID).CommitOffsets(&fwd, answer)
}
