package protocol

// A follower's Metadata for a topic it does not know yet. Topic changes
// reach a follower a commit notice after the leader applied them, so a
// client that created a topic through one node and asks another at once
// (or a consumer asking right after a producer auto-created the topic)
// would be told UNKNOWN_TOPIC_OR_PARTITION by a node that merely lags, and
// many clients take that as final (librdkafka's query_watermark_offsets
// fails with "Unknown partition"). So before calling a named topic unknown,
// a follower asks the leader the same question (a read-only forward): the
// leader's answer carries its state index, which this node waits to reach
// (up to forwardApplyWait), then it answers from its own state; a topic
// the leader knows that this node still has not applied is answered
// LEADER_NOT_AVAILABLE, which clients retry. Kafka's brokers have the same
// window, unguarded; this closes it for the common case.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/topics"
)

// catchUpVersion is the Metadata version of a follower's read-only forward:
// topics by name, auto-creation off, served by every Regent.
const catchUpVersion = 12

// readForwardedKeys are the read-only requests a leader serves for a
// follower's catch-up (never forwarded on a client's behalf).
var readForwardedKeys = map[int16]bool{
	3: true, // Metadata
}

// unknownNamedTopics lists the topics req names by name that this node does
// not know: neither its own nor internal ones, and valid names only.
func (s *Server) unknownNamedTopics(req *kmsg.MetadataRequest) []string {
	var names []string
	for _, t := range req.Topics {
		if t.Topic == nil || isInternalTopic(*t.Topic) || topics.ValidateName(*t.Topic) != nil {
			continue
		}
		if s.topics.Get(*t.Topic) == nil {
			names = append(names, *t.Topic)
		}
	}
	return names
}

// mayCatchUp reports whether this node should ask the leader before
// calling a topic unknown: a follower that can forward, serving a client.
func (s *Server) mayCatchUp(r *Request) bool {
	return s.forwarder != nil && !r.local && !s.cluster.Serving()
}

// metadataCatchingUp answers req on a follower after catching up with the
// leader on the topics named in missing. Off the event loop.
func (s *Server) metadataCatchingUp(r *Request, req *kmsg.MetadataRequest, missing []string) *kmsg.MetadataResponse {
	known := s.knownAtLeader(r, missing)
	resp := s.buildMetadata(r, req, false)
	for i := range resp.Topics {
		mt := &resp.Topics[i]
		if mt.Topic != nil && mt.ErrorCode == kerr.UnknownTopicOrPartition.Code && known[*mt.Topic] {
			mt.ErrorCode = kerr.LeaderNotAvailable.Code
		}
	}
	return resp
}

// knownAtLeader asks the leader which of names it knows and waits until
// this node's state holds what the leader's held when it answered. A
// failed forward leaves every name as this node sees it.
func (s *Server) knownAtLeader(r *Request, names []string) map[string]bool {
	mr := kmsg.NewPtrMetadataRequest()
	mr.Version = catchUpVersion
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		mr.Topics = append(mr.Topics, t)
	}
	fr := forwardedAs(r, mr)
	ctx, cancel := context.WithTimeout(context.Background(), forwardApplyWait)
	defer cancel()
	body, index, err := s.forward(ctx, fr)
	if err != nil {
		if !errors.Is(err, errServeHere) {
			s.log.DebugContext(r.Context(), "metadata catch-up with the leader failed; answering from this node's state", "topics", names, "err", err)
		}
		return nil
	}
	resp := mr.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(mr.Version)
	if err := decodeResponse(resp, body); err != nil {
		s.log.WarnContext(r.Context(), "the leader's metadata answer does not decode", "err", err)
		return nil
	}
	s.awaitStateIndex(ctx, index)
	known := make(map[string]bool, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			known[*t.Topic] = true
		}
	}
	return known
}
