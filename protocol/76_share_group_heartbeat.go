package protocol

// ShareGroupHeartbeat: version 1, as Kafka 4.3 serves it (v0 was Kafka
// 4.0's early-access form, gone since 4.1). KIP-932 share group
// membership: members choose their ids (at most 36 characters) and join
// with epoch 0, leave with -1; the coordinator assigns every partition of
// the subscribed topics with the share "simple" assignor (actors/group).
// A group id used by a classic or consumer group is GROUP_ID_NOT_FOUND
// ("Group X is not a share group."). Refused with UNSUPPORTED_VERSION
// while share groups are off (share.version 0), as Kafka.
// ACLs: READ on the group, then DESCRIBE on every subscribed topic, as
// Kafka checks them.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(76, 1, 1, (*Server).shareGroupHeartbeat) }

func (s *Server) shareGroupHeartbeat(r *Request) {
	req := r.Msg.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(code int16) {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		r.Respond(resp)
	}
	if !s.shareOn() {
		fail(kerr.UnsupportedVersion.Code)
		return
	}
	if !s.authorized(r, acls.Read, acls.Group, req.GroupID) {
		fail(kerr.GroupAuthorizationFailed.Code)
		return
	}
	// Kafka checks the member id before the topics (KafkaApis'
	// isMemberIdValid), without a message.
	if req.MemberID == "" || len(req.MemberID) > 36 {
		fail(kerr.InvalidRequest.Code)
		return
	}
	if s.authz != nil {
		for _, t := range req.SubscribedTopicNames {
			if !s.authorized(r, acls.Describe, acls.Topic, t) {
				fail(kerr.TopicAuthorizationFailed.Code)
				return
			}
		}
	}
	s.groupsFor(req.GroupID).ShareGroupHeartbeat(req, groupClient(r), registryTopics{s, r}, func(resp *kmsg.ShareGroupHeartbeatResponse) {
		r.Respond(resp)
	})
}
