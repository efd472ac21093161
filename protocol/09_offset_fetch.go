package protocol

// OffsetFetch: versions 0-10 (v8+ several groups per request, v9 the
// KIP-848 member id and epoch, v10 topics by id). Null topics (v2+) fetch
// every committed offset of the group. RequireStable (v7+) is accepted;
// transactional offsets are not pending in this coordinator, so every
// offset is stable. Uncommitted partitions answer offset -1, as Kafka.
// For v10, a topic id that does not resolve gets UNKNOWN_TOPIC_ID, and in
// an all-topics fetch committed offsets of topics that no longer exist are
// left out (they have no id to name them by).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/group"
)

func init() { register(9, 0, 10, (*Server).offsetFetch) }

func (s *Server) offsetFetch(r *Request) {
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		s.offsetFetchSingle(r, req, resp)
		return
	}
	resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
	finish := fanIn(len(req.Groups), func() { r.Respond(resp) })
	for i, rg := range req.Groups {
		if !s.authorized(r, acls.Describe, acls.Group, rg.Group) {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, kerr.GroupAuthorizationFailed.Code
			resp.Groups[i] = g
			finish()
			continue
		}
		q := group.FetchQuery{MemberID: rg.MemberID, MemberEpoch: rg.MemberEpoch, RequireStable: req.RequireStable}
		// resolved[k] is false for a v10 topic id that names no topic.
		var resolved []bool
		if rg.Topics != nil {
			q.Topics = []group.FetchTopic{}
			for _, rt := range rg.Topics {
				name := rt.Topic
				if req.Version >= 10 {
					t, ok := s.offsetTopicByID(rt.TopicID)
					if !ok {
						resolved = append(resolved, false)
						continue
					}
					name = t.Name
				}
				resolved = append(resolved, true)
				q.Topics = append(q.Topics, group.FetchTopic{Topic: name, Partitions: rt.Partitions})
			}
		}
		s.groupsFor(rg.Group).FetchOffsets(rg.Group, q, func(g kmsg.OffsetFetchResponseGroup) {
			s.filterFetchedTopics(r, &g, rg.Topics == nil)
			if req.Version >= 10 {
				g.Topics = s.fetchTopicIDs(rg.Topics, resolved, g)
			}
			resp.Groups[i] = g
			finish()
		})
	}
}

// fetchTopicIDs gives a v10 answer its topic ids: requested topics in
// request order (unresolved ids with UNKNOWN_TOPIC_ID), or, for an
// all-topics fetch, every committed topic that still exists.
func (s *Server) fetchTopicIDs(requested []kmsg.OffsetFetchRequestGroupTopic, resolved []bool, g kmsg.OffsetFetchResponseGroup) []kmsg.OffsetFetchResponseGroupTopic {
	if g.ErrorCode != 0 {
		return g.Topics
	}
	var out []kmsg.OffsetFetchResponseGroupTopic
	if requested == nil {
		for _, gt := range g.Topics {
			if t, ok := s.offsetTopicByName(gt.Topic); ok {
				gt.TopicID = t.ID
				out = append(out, gt)
			}
		}
		return out
	}
	next := 0
	for k, rt := range requested {
		if !resolved[k] {
			ot := kmsg.NewOffsetFetchResponseGroupTopic()
			ot.TopicID = rt.TopicID
			for _, p := range rt.Partitions {
				op := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				op.Partition, op.Offset, op.ErrorCode = p, -1, kerr.UnknownTopicID.Code
				ot.Partitions = append(ot.Partitions, op)
			}
			out = append(out, ot)
			continue
		}
		if next < len(g.Topics) {
			gt := g.Topics[next]
			gt.TopicID = rt.TopicID
			out = append(out, gt)
			next++
		}
	}
	return out
}

// offsetFetchSingle serves v0-v7: one group, a top-level error from v2
// (before that, in every partition).
func (s *Server) offsetFetchSingle(r *Request, req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	q := group.FetchQuery{MemberEpoch: -1, RequireStable: req.RequireStable}
	if req.Topics != nil || req.Version < 2 {
		q.Topics = []group.FetchTopic{}
		for _, rt := range req.Topics {
			q.Topics = append(q.Topics, group.FetchTopic{Topic: rt.Topic, Partitions: rt.Partitions})
		}
	}
	if !s.authorized(r, acls.Describe, acls.Group, req.Group) {
		g := kmsg.NewOffsetFetchResponseGroup()
		g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		s.offsetFetchSingleAnswer(r, req, resp, g)
		return
	}
	s.groupsFor(req.Group).FetchOffsets(req.Group, q, func(g kmsg.OffsetFetchResponseGroup) {
		s.filterFetchedTopics(r, &g, req.Topics == nil && req.Version >= 2)
		s.offsetFetchSingleAnswer(r, req, resp, g)
	})
}

// filterFetchedTopics applies DESCRIBE on each topic, as Kafka does: an
// all-topics fetch leaves out the topics the principal may not describe, a
// named topic answers TOPIC_AUTHORIZATION_FAILED in each partition.
func (s *Server) filterFetchedTopics(r *Request, g *kmsg.OffsetFetchResponseGroup, all bool) {
	if s.authz == nil || g.ErrorCode != 0 {
		return
	}
	// Copies: the group's answer is not this handler's to modify.
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(g.Topics))
	for _, gt := range g.Topics {
		if s.authorizedQuiet(r, acls.Describe, acls.Topic, gt.Topic) {
			out = append(out, gt)
			continue
		}
		if all {
			continue
		}
		s.denied(r, acls.Describe, acls.Topic, gt.Topic, string(acls.ReasonNoMatch))
		gt.Partitions = append([]kmsg.OffsetFetchResponseGroupTopicPartition(nil), gt.Partitions...)
		for j := range gt.Partitions {
			gt.Partitions[j].Offset, gt.Partitions[j].LeaderEpoch, gt.Partitions[j].Metadata = -1, -1, nil
			gt.Partitions[j].ErrorCode = kerr.TopicAuthorizationFailed.Code
		}
		out = append(out, gt)
	}
	g.Topics = out
}

// offsetFetchSingleAnswer builds a v0-v7 answer from the group's.
func (s *Server) offsetFetchSingleAnswer(r *Request, req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse, g kmsg.OffsetFetchResponseGroup) {
	if g.ErrorCode != 0 && req.Version < 2 {
		for _, rt := range req.Topics {
			ot := kmsg.NewOffsetFetchResponseTopic()
			ot.Topic = rt.Topic
			for _, p := range rt.Partitions {
				op := kmsg.NewOffsetFetchResponseTopicPartition()
				op.Partition, op.Offset, op.ErrorCode = p, -1, g.ErrorCode
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		r.Respond(resp)
		return
	}
	resp.ErrorCode = g.ErrorCode
	for _, gt := range g.Topics {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = gt.Topic
		for _, gp := range gt.Partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch, op.Metadata, op.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	r.Respond(resp)
}
