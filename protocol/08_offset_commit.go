package protocol

// OffsetCommit: versions 0-10. Commits by members (generation checked) and
// without membership (generation -1, empty member id: admin clients,
// Flink's source), which Kafka takes only while the group is empty or does
// not exist, creating a "simple" group. Partitions of unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION here (the internal topics are known: see
// offset_topics.go); the rest goes to the group's actor and
// is on disk when answered. v1's per-partition timestamp and v2-v4's
// retention time are kept as Kafka keeps them (commit time, expiry).
//
// v10 names topics by id only (KIP-848): ids are resolved through the
// topic registry here, so the group keeps offsets by name as before; an id
// that names no topic (never existed, or deleted and perhaps recreated
// under a new id) gets UNKNOWN_TOPIC_ID, and the answer carries the ids.
// As in Kafka, a v10 request with a zero id (a client that sends names
// only, such as franz-go's kadm v1.17 CommitOffsets) gets
// UNKNOWN_TOPIC_ID: the wire carries no name to fall back on. Such
// clients must stay at v9 or fill the ids from Metadata.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(8, 0, 10, (*Server).offsetCommit) }

func (s *Server) offsetCommit(r *Request) {
	req := r.Msg.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	fwd := *req
	fwd.Topics = nil
	// targets are the response codes the group's answer fills, in the
	// order of fwd's partitions.
	var targets []*int16
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	// Kafka's checks: READ on the group (every partition answers
	// GROUP_AUTHORIZATION_FAILED), then the topic id's resolution (v10),
	// READ on each topic, and the partition's existence.
	groupOK := s.authorized(r, acls.Read, acls.Group, req.Group)
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewOffsetCommitResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		t, found, unknownID := s.commitTopic(req.Version, 10, rt.Topic, rt.TopicID)
		name := rt.Topic
		if found {
			name = t.Name
		}
		out.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		var ft *kmsg.OffsetCommitRequestTopic
		topicOK := groupOK && !unknownID && s.authorized(r, acls.Read, acls.Topic, name)
		for j, rp := range rt.Partitions {
			op := &out.Partitions[j]
			*op = kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case !groupOK:
				op.ErrorCode = kerr.GroupAuthorizationFailed.Code
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
				fwd.Topics = append(fwd.Topics, kmsg.OffsetCommitRequestTopic{Topic: t.Name, TopicID: t.ID})
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
	s.groupsFor(req.Group).CommitOffsets(&fwd, func(gr *kmsg.OffsetCommitResponse) {
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
	})
}
