package protocol

// DescribeTopicPartitions: version 0 (KIP-966; what Kafka 4's admin client
// and kafka-topics --describe use in place of Metadata). Named topics, or
// every topic when none is named (the internal ones included, is_internal
// set), in name order from the cursor's topic and partition, at most
// min(ResponsePartitionLimit, 2000) partitions per response (Kafka's
// max.request.partition.size.limit default); the cursor left where the
// page ended. Unknown named topics answer UNKNOWN_TOPIC_OR_PARTITION
// (INVALID_TOPIC_EXCEPTION for an invalid name) without using the page. A
// cursor naming a topic the request does not list is INVALID_REQUEST for
// every topic, as Kafka answers. Regent has no eligible leader replicas
// (KIP-966's ELR): raft elects among the voters, so those lists are empty.
//
// ACLs as Metadata: a listing leaves out topics the principal may not
// DESCRIBE; a named one answers TOPIC_AUTHORIZATION_FAILED with no id.

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
)

func init() { register(75, 0, 0, (*Server).describeTopicPartitions) }

// maxPartitionsPerDescribe is Kafka's max.request.partition.size.limit
// default: the most partitions one response holds.
const maxPartitionsPerDescribe = 2000

func (s *Server) describeTopicPartitions(r *Request) {
	req := r.Msg.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	cursorTopic, cursorPartition := "", int32(0)
	if req.Cursor != nil {
		cursorTopic, cursorPartition = req.Cursor.Topic, req.Cursor.Partition
	}
	var names []string
	if all {
		for _, t := range s.topics.List() {
			names = append(names, t.Name)
		}
		for _, it := range s.internalTopics() {
			names = append(names, it.Name)
		}
	} else {
		seen := map[string]bool{}
		for _, rt := range req.Topics {
			if !seen[rt.Topic] {
				seen[rt.Topic] = true
				names = append(names, rt.Topic)
			}
		}
		if req.Cursor != nil && !seen[cursorTopic] {
			msg := fmt.Sprintf("the topic list should contain the cursor's topic %q", cursorTopic)
			for _, name := range names {
				ot := kmsg.NewDescribeTopicPartitionsResponseTopic()
				ot.Topic, ot.ErrorCode = kmsg.StringPtr(name), kerr.InvalidRequest.Code
				resp.Topics = append(resp.Topics, ot)
			}
			s.log.DebugContext(r.Context(), "DescribeTopicPartitions refused", "reason", msg)
			r.Respond(resp)
			return
		}
	}
	var allowed []string
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	for _, name := range names {
		if name < cursorTopic {
			continue
		}
		if all {
			if s.authorizedQuiet(r, acls.Describe, acls.Topic, name) {
				allowed = append(allowed, name)
			}
			continue
		}
		if !s.authorized(r, acls.Describe, acls.Topic, name) {
			ot := kmsg.NewDescribeTopicPartitionsResponseTopic()
			ot.Topic, ot.ErrorCode = kmsg.StringPtr(name), kerr.TopicAuthorizationFailed.Code
			denied = append(denied, ot)
			continue
		}
		allowed = append(allowed, name)
	}
	sort.Strings(allowed)
	// The cursor's partition counts only if its topic may be described
	// (else the page starts that topic at 0, as Kafka does).
	if cursorTopic == "" || !s.authorizedQuiet(r, acls.Describe, acls.Topic, cursorTopic) {
		cursorPartition = 0
	}
	limit := min(req.ResponsePartitionLimit, maxPartitionsPerDescribe)
	spans, next := pageTopicPartitions(allowed, s.describedPartitions, cursorTopic, cursorPartition, limit)
	for _, sp := range spans {
		ot := s.describedTopic(r, sp)
		if all && ot.ErrorCode != 0 {
			continue // deleted since it was listed: a listing skips it, as Kafka's does
		}
		resp.Topics = append(resp.Topics, ot)
	}
	if next != nil {
		resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: next.topic, Partition: next.partition}
	}
	resp.Topics = append(resp.Topics, denied...)
	r.Respond(resp)
}

// describedPartitions is the partition count of a topic, internal or not.
func (s *Server) describedPartitions(name string) (int32, bool) {
	if it, ok := s.internalTopic(name); ok {
		return it.Partitions, true
	}
	if t := s.topics.Get(name); t != nil {
		return int32(len(t.Partitions)), true
	}
	return 0, false
}

// topicSpan is the part of one topic a page holds: partitions [from, to),
// or a topic that does not exist.
type topicSpan struct {
	topic    string
	from, to int32
	missing  bool
}

// pageCursor is where the next page starts.
type pageCursor struct {
	topic     string
	partition int32
}

// pageTopicPartitions cuts one page of at most limit partitions from the
// sorted topics, starting topic cursorTopic at partition first: each
// existing topic is a span of its partitions until the page is full; a
// missing topic is a span of its own that takes no room. next is nil when
// the page holds everything from the start on; else it is the first
// partition the page left out (a topic's partition 0 when the page filled
// exactly at a topic's end and topics remain).
func pageTopicPartitions(sorted []string, count func(string) (int32, bool), cursorTopic string, first, limit int32) (spans []topicSpan, next *pageCursor) {
	remaining := limit
	for _, name := range sorted {
		if remaining <= 0 {
			if remaining == 0 {
				next = &pageCursor{topic: name}
			}
			return spans, next
		}
		n, ok := count(name)
		if !ok {
			spans = append(spans, topicSpan{topic: name, missing: true})
			continue
		}
		from := int32(0)
		if name == cursorTopic {
			from = max(first, 0)
		}
		to := n
		if from < n && n-from > remaining {
			to = from + remaining
		}
		if from > to {
			from = to
		}
		spans = append(spans, topicSpan{topic: name, from: from, to: to})
		if to < n {
			return spans, &pageCursor{topic: name, partition: to}
		}
		remaining -= to - from
	}
	return spans, nil
}

// describedTopic is one topic's entry: its partitions in the span, or the
// error of a topic that does not exist.
func (s *Server) describedTopic(r *Request, sp topicSpan) kmsg.DescribeTopicPartitionsResponseTopic {
	ot := kmsg.NewDescribeTopicPartitionsResponseTopic()
	ot.Topic = kmsg.StringPtr(sp.topic)
	var (
		leaderOf func(int32) int32 // nil: the partition's group's leader
		topic    *topics.Topic     // nil: internal
	)
	if it, ok := s.internalTopic(sp.topic); ok {
		ot.TopicID, ot.IsInternal = it.ID, true
		leaderOf = s.internalPartitionLeader
	} else if t := s.topics.Get(sp.topic); t != nil && !sp.missing {
		ot.TopicID, topic = t.ID, t
	} else {
		ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if topics.ValidateName(sp.topic) != nil {
			ot.ErrorCode = kerr.InvalidTopicException.Code
		}
		return ot
	}
	ot.AuthorizedOperations = s.authorizedOps(r, acls.Topic, sp.topic, topicOperations)
	// A partition is led by its raft group's leader, in the group's term;
	// its ISR is the group's in-sync voters (an internal topic's: the
	// metadata group's, which holds the coordinators).
	voters, groups := s.cluster.Voters(), s.newGroupStates()
	ot.Partitions = make([]kmsg.DescribeTopicPartitionsResponseTopicPartition, 0, sp.to-sp.from)
	for p := sp.from; p < sp.to; p++ {
		g := groups.of(topic, p)
		op := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		op.Partition, op.LeaderEpoch = p, g.epoch
		switch {
		case leaderOf != nil:
			op.LeaderID = leaderOf(p)
			if _, ok := s.broker(op.LeaderID); !ok {
				op.LeaderID = -1
			}
		case g.known:
			op.LeaderID = g.leader
		default:
			op.LeaderID = -1
		}
		op.Replicas, op.ISR = replicaLists(topic, p, voters, g.isr)
		// Empty, not null: Kafka sends lists here, and its admin client
		// reads them without a null check.
		op.EligibleLeaderReplicas, op.LastKnownELR, op.OfflineReplicas = []int32{}, []int32{}, []int32{}
		ot.Partitions = append(ot.Partitions, op)
	}
	return ot
}
