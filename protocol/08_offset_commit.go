package protocol

// OffsetCommit: versions 0-9. Commits by members (generation checked) and
// without membership (generation -1, empty member id: admin clients,
// Flink's source), which Kafka takes only while the group is empty or does
// not exist, creating a "simple" group. Partitions of unknown topics get
// UNKNOWN_TOPIC_OR_PARTITION here; the rest goes to the group's actor and
// is on disk when answered. v1's per-partition timestamp and v2-v4's
// retention time are kept as Kafka keeps them (commit time, expiry).
//
// Deviation: v10 (topics by id only) is not advertised. franz-go's kadm
// (v1.17) sends raw OffsetCommits with topic names alone, so at v10 every
// admin commit would name a zero topic id and fail; v9 serves every client
// the same offsets.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(8, 0, 9, (*Server).offsetCommit) }

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
	// GROUP_AUTHORIZATION_FAILED), then READ on each topic.
	groupOK := s.authorized(r, acls.Read, acls.Group, req.Group)
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewOffsetCommitResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		t := s.topics.Get(rt.Topic)
		out.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		var ft *kmsg.OffsetCommitRequestTopic
		topicOK := groupOK && s.authorized(r, acls.Read, acls.Topic, rt.Topic)
		for j, rp := range rt.Partitions {
			op := &out.Partitions[j]
			*op = kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			if !groupOK {
				op.ErrorCode = kerr.GroupAuthorizationFailed.Code
				continue
			}
			if !topicOK {
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions) {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if ft == nil {
				fwd.Topics = append(fwd.Topics, kmsg.OffsetCommitRequestTopic{Topic: t.Name})
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
	s.groups.CommitOffsets(&fwd, func(gr *kmsg.OffsetCommitResponse) {
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
