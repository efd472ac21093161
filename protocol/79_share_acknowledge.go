package protocol

// ShareAcknowledge: versions 1-2, as Kafka 4.3 serves them (v2 adds
// RENEW acknowledgements, KIP-1222, and AcquisitionLockTimeoutMs in the
// response). Acknowledgements of records a member acquired through
// ShareFetch, outside a fetch: within the member's share session, whose
// epoch must be the one expected (0 is refused with
// INVALID_SHARE_SESSION_EPOCH: a session is opened by ShareFetch); -1
// applies them and then closes the session, releasing what the member
// still holds. Each partition answers its own error code (an ack of
// records the member does not hold: INVALID_RECORD_STATE).
// ACLs: READ on the group, READ on each topic, as ShareFetch.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(79, 1, 2, (*Server).shareAcknowledge) }

func (s *Server) shareAcknowledge(r *Request) {
	if s.forwardShare(r) {
		return
	}
	req := r.Msg.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := deref(req.GroupID), deref(req.MemberID)
	code, msg := s.shareMemberCheck(r, group, member)
	switch {
	case code != 0:
		resp.ErrorCode, resp.ErrorMessage = code, msg
	case req.ShareSessionEpoch == 0:
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		resp.ErrorMessage = kmsg.StringPtr("ShareAcknowledge cannot open a share session (epoch 0)")
	}
	if resp.ErrorCode != 0 {
		r.Respond(resp)
		return
	}
	// Acknowledgements wait for the share-partitions' writes: off the loop.
	s.async(r, func() kmsg.Response { return s.doShareAcknowledge(r, req, group, member) })
}

// shareMemberCheck answers what ShareFetch and ShareAcknowledge both check
// first, in Kafka's order: share groups on, a group id, READ on the group,
// a member id. code 0: all hold.
func (s *Server) shareMemberCheck(r *Request, group, member string) (code int16, msg *string) {
	switch {
	case !s.shareOn():
		return kerr.UnsupportedVersion.Code, nil
	case group == "":
		return kerr.InvalidRequest.Code, kmsg.StringPtr("Invalid group id in the request.")
	case !s.authorized(r, acls.Read, acls.Group, group):
		return kerr.GroupAuthorizationFailed.Code, nil
	case member == "":
		return kerr.InvalidRequest.Code, kmsg.StringPtr("Invalid member id in the request.")
	}
	return 0, nil
}

func (s *Server) doShareAcknowledge(r *Request, req *kmsg.ShareAcknowledgeRequest, group, member string) *kmsg.ShareAcknowledgeResponse {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	resp.AcquisitionLockTimeoutMillis = s.shareLockMs(group)
	st := s.share
	key := shareKey(r, group, member)

	var items []*shareItem
	for _, rt := range req.Topics {
		name := s.shareTopicName(rt.TopicID)
		for _, rp := range rt.Partitions {
			it := &shareItem{part: sharePart{topicID: rt.TopicID, topic: name, partition: rp.Partition}, hasAcks: true}
			acks, err := shareAcks(len(rp.AcknowledgementBatches), func(i int) (int64, int64, []int8) {
				b := rp.AcknowledgementBatches[i]
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			}, req.IsRenewAck)
			if err != nil {
				it.ackErr = kerr.InvalidRequest.Code
			}
			it.acks = acks
			items = append(items, it)
		}
	}

	// The epoch is checked and moved on before the acknowledgements are
	// applied, so that a retried request with a stale epoch changes
	// nothing. A node that does not serve has no sessions: its answer
	// points at the leader (shareCheckItems).
	var sessErr *kerr.Error
	switch serving := s.shareServing(group); {
	case !serving:
	case req.ShareSessionEpoch == -1:
		sessErr = st.sessions.check(key, -1)
	default:
		_, _, sessErr = st.sessions.next(key, req.ShareSessionEpoch, nil, nil)
	}
	if sessErr != nil {
		resp.ErrorCode = sessErr.Code
		return resp
	}

	s.shareCheckItems(r, group, items)
	s.shareApplyAcks(group, member, items)
	if req.ShareSessionEpoch == -1 && s.shareServing(group) {
		if parts, err := st.sessions.close(key); err == nil {
			s.releaseParts(group, member, parts)
		}
	}

	leaders := s.newCurrentLeaders()
	topicAt := map[[16]byte]int{}
	for _, it := range items {
		ti := shareTopicSlot(&resp.Topics, topicAt, it.part.topicID, func(id [16]byte) kmsg.ShareAcknowledgeResponseTopic {
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = id
			return t
		})
		p := kmsg.NewShareAcknowledgeResponseTopicPartition()
		p.Partition = it.part.partition
		p.ErrorCode = it.ackErr
		// Shares are served by the share coordinator: the metadata
		// group's leader (nil topic), whatever group orders the partition.
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaders.of(it.err, false, nil, 0)
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
	for _, b := range leaders.endpoints() {
		ep := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
		ep.NodeID, ep.Host, ep.Port = b.ID, b.Host, b.Port
		resp.NodeEndpoints = append(resp.NodeEndpoints, ep)
	}
	return resp
}
