package protocol

// AlterShareGroupOffsets: version 0, as Kafka 4.3 serves it; what
// kafka-share-groups.sh --reset-offsets sends. Each named share-partition
// starts again at the given offset, its in-flight state dropped. Only for
// an empty share group (NON_EMPTY_GROUP otherwise, and for a partition
// whose records a member that joined since the check holds); a group that does not
// exist is made, an empty share group, as Kafka makes it (GROUP_ID_NOT_FOUND
// for a group of another type).
// ACLs: READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
// topic (else its partitions answer TOPIC_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/share"
)

func init() { register(91, 0, 0, (*Server).alterShareGroupOffsets) }

func (s *Server) alterShareGroupOffsets(r *Request) {
	req := r.Msg.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	s.shareOffsetsGate(r, req.GroupID, acls.Read, true, func(code int16, msg *string) {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		r.Respond(resp)
	}, func() { s.alterShareOffsets(r, req, resp) })
}

func (s *Server) alterShareOffsets(r *Request, req *kmsg.AlterShareGroupOffsetsRequest, resp *kmsg.AlterShareGroupOffsetsResponse) {
	type slot struct{ ti, pi int }
	var offs []share.StartOffset
	var slots []slot
	for ti, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t, code := s.shareTopicCheck(r, acls.Read, rt.Topic)
		if t != nil {
			ot.TopicID = t.ID
		}
		for pi, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition, op.ErrorCode = rp.Partition, code
			switch {
			case code != 0:
			case rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				op.ErrorCode = kerr.InvalidRequest.Code
				op.ErrorMessage = kmsg.StringPtr("the start offset must not be negative")
			default:
				offs = append(offs, share.StartOffset{Topic: rt.Topic, TopicID: t.ID, Partition: rp.Partition, StartOffset: rp.StartOffset})
				slots = append(slots, slot{ti, pi})
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if len(offs) == 0 {
		r.Respond(resp)
		return
	}
	s.share.core.AlterStartOffsets(req.GroupID, offs, func(res []share.StartOffsetResult) {
		for _, sl := range slots {
			op := &resp.Topics[sl.ti].Partitions[sl.pi]
			for _, x := range res {
				if x.Topic == resp.Topics[sl.ti].Topic && x.Partition == op.Partition {
					op.ErrorCode = x.ErrorCode
					break
				}
			}
		}
		r.Respond(resp)
	})
}
