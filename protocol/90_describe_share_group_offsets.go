package protocol

// DescribeShareGroupOffsets: versions 0-1 (v1 adds each partition's lag),
// as Kafka 4.3 serves them; what kafka-share-groups.sh --describe shows.
// Each group answers its share-partitions' start offsets (SPSO; -1 for a
// partition the group never read) and lag (-1 when unknown); with no topics
// named, every partition the group holds state for. A group that is not a
// share group answers GROUP_ID_NOT_FOUND.
// ACLs: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), DESCRIBE
// on each topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/share"
)

func init() { register(90, 0, 1, (*Server).describeShareGroupOffsets) }

func (s *Server) describeShareGroupOffsets(r *Request) {
	req := r.Msg.(*kmsg.DescribeShareGroupOffsetsRequest)
	// The coordinator and the share-partitions are asked in turn: off the
	// event loop.
	s.async(r, func() kmsg.Response { return s.doDescribeShareGroupOffsets(r, req) })
}

func (s *Server) doDescribeShareGroupOffsets(r *Request, req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	resp.Groups = make([]kmsg.DescribeShareGroupOffsetsResponseGroup, len(req.Groups))
	for gi, rg := range req.Groups {
		og := &resp.Groups[gi]
		*og = kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		og.GroupID = rg.GroupID
		switch {
		case !s.shareOn():
			og.ErrorCode = kerr.UnsupportedVersion.Code
			continue
		case !s.authorized(r, acls.Describe, acls.Group, rg.GroupID):
			og.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if code, msg := s.shareGroupCheckWait(rg.GroupID, false); code != 0 {
			og.ErrorCode = code
			if msg != "" {
				og.ErrorMessage = kmsg.StringPtr(msg)
			}
			continue
		}
		var parts []share.TopicPartition // nil: all of the group's
		for _, rt := range rg.Topics {
			ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			ot.Topic = rt.Topic
			t, code := s.shareTopicCheck(r, acls.Describe, rt.Topic)
			if t != nil {
				ot.TopicID = t.ID
			}
			for _, p := range rt.Partitions {
				pcode := code
				if pcode == 0 && (p < 0 || int(p) >= len(t.Partitions)) {
					pcode = kerr.UnknownTopicOrPartition.Code
				}
				if pcode != 0 {
					op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					op.Partition, op.StartOffset, op.LeaderEpoch, op.Lag, op.ErrorCode = p, -1, -1, -1, pcode
					ot.Partitions = append(ot.Partitions, op)
					continue
				}
				parts = append(parts, share.TopicPartition{Topic: rt.Topic, TopicID: t.ID, Partition: p})
			}
			og.Topics = append(og.Topics, ot)
		}
		if rg.Topics != nil && len(parts) == 0 {
			continue // every partition named was refused above
		}
		ch := make(chan []share.StartOffset, 1)
		s.share.core.StartOffsets(og.GroupID, parts, func(offs []share.StartOffset) { ch <- offs })
		for _, o := range <-ch {
			if t := s.topics.Get(o.Topic); o.TopicID == ([16]byte{}) && t != nil {
				o.TopicID = t.ID
			}
			ot := shareDescribeTopic(og, o.Topic, o.TopicID)
			op := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			op.Partition, op.StartOffset, op.Lag, op.ErrorCode = o.Partition, o.StartOffset, o.Lag, o.ErrorCode
			op.LeaderEpoch = 0
			if o.StartOffset < 0 {
				op.LeaderEpoch = -1
			}
			ot.Partitions = append(ot.Partitions, op)
		}
	}
	return resp
}

// shareDescribeTopic finds or adds the group's answer for topic.
func shareDescribeTopic(og *kmsg.DescribeShareGroupOffsetsResponseGroup, topic string, id [16]byte) *kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	for i := range og.Topics {
		if og.Topics[i].Topic == topic {
			if og.Topics[i].TopicID == ([16]byte{}) {
				og.Topics[i].TopicID = id
			}
			return &og.Topics[i]
		}
	}
	ot := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
	ot.Topic, ot.TopicID = topic, id
	og.Topics = append(og.Topics, ot)
	return &og.Topics[len(og.Topics)-1]
}
