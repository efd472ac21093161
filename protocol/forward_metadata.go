package protocol

// Metadata's auto-creation in a cluster: a follower cannot create a topic
// itself, so it asks the leader with a CreateTopics (default partitions and
// replication factor) on behalf of the client's principal, which the
// leader authorizes as it would the client's own CreateTopics. The answer
// is then built from this node's replicated view: a topic the leader
// created that this node has not applied yet is answered
// LEADER_NOT_AVAILABLE, as Kafka answers a topic being created, and the
// client asks again. Metadata never carries NOT_CONTROLLER for a topic.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// autoCreateWait bounds the creation a Metadata request waits for:
	// Kafka does not wait at all (the topic is reported being created),
	// so this only spares the client a round trip in the common case.
	autoCreateWait = 3 * time.Second
	// autoCreateApplyWait bounds the wait for this node to apply a topic
	// the leader created (one raft commit notice, normally milliseconds).
	autoCreateApplyWait = time.Second
	// autoCreateVersion is the CreateTopics version a follower sends: the
	// first that takes -1 for the broker's default partitions and
	// replication factor, served by every Regent.
	autoCreateVersion = 4
)

// metadataCreating answers a Metadata request that names topics to create:
// created here on the serving leader (or a single node), through the
// leader on a follower that can forward. Off the event loop.
func (s *Server) metadataCreating(r *Request, req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	if s.forwarder == nil || r.local || s.cluster.Serving() {
		return retriableTopicErrors(s.buildMetadata(r, req, true))
	}
	// The topics to create are those this node's own answer calls
	// unknown: not the ones the principal may not describe, nor invalid
	// names, nor internal topics.
	var missing []string
	for _, mt := range s.buildMetadata(r, req, false).Topics {
		if mt.Topic != nil && mt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			missing = append(missing, *mt.Topic)
		}
	}
	codes, err := s.createAtLeader(r, missing)
	if errors.Is(err, errServeHere) {
		return retriableTopicErrors(s.buildMetadata(r, req, true))
	}
	if err != nil {
		s.log.WarnContext(r.Context(), "auto-creation through the leader failed; topics answered LEADER_NOT_AVAILABLE", "topics", missing, "err", err)
		codes = make(map[string]int16, len(missing))
		for _, n := range missing {
			codes[n] = kerr.LeaderNotAvailable.Code
		}
	}
	s.awaitTopics(codes)
	resp := s.buildMetadata(r, req, false)
	for i := range resp.Topics {
		mt := &resp.Topics[i]
		if mt.Topic == nil || mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			continue
		}
		if code, asked := codes[*mt.Topic]; asked {
			// 0: created at the leader, not applied here yet.
			mt.ErrorCode = code
			if code == 0 {
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
			}
		}
	}
	return retriableTopicErrors(resp)
}

// createAtLeader asks the leader to create names with the broker's
// defaults and returns each topic's error code (0: created or already
// there). errServeHere: this node leads now and creates them itself.
func (s *Server) createAtLeader(r *Request, names []string) (map[string]int16, error) {
	codes := make(map[string]int16, len(names))
	if len(names) == 0 {
		return codes, nil
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = autoCreateVersion
	ct.TimeoutMillis = int32(autoCreateWait / time.Millisecond)
	for _, n := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = n, -1, -1
		ct.Topics = append(ct.Topics, t)
	}
	fr := forwardedAs(r, ct)
	ctx, cancel := context.WithTimeout(context.Background(), autoCreateWait)
	defer cancel()
	body, _, err := s.forward(ctx, fr)
	if err != nil {
		return nil, err
	}
	resp := ct.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(ct.Version)
	if err := decodeResponse(resp, body); err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		code := t.ErrorCode
		if code == kerr.TopicAlreadyExists.Code {
			code = 0
		}
		codes[t.Topic] = code
	}
	return codes, nil
}

// awaitTopics waits, up to autoCreateApplyWait, until this node has
// applied every topic the leader created (code 0). The registry has no
// change notice, so it looks every few milliseconds; a topic still
// missing then is answered LEADER_NOT_AVAILABLE.
func (s *Server) awaitTopics(codes map[string]int16) {
	deadline := time.Now().Add(autoCreateApplyWait)
	for {
		pending := false
		for name, code := range codes {
			if code == 0 && s.topics.Get(name) == nil {
				pending = true
				break
			}
		}
		if !pending || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// retriableTopicErrors replaces the controller errors a creation may meet
// (leadership lost meanwhile, an outcome unknown) with
// LEADER_NOT_AVAILABLE: clients retry that on a topic, while Kafka's
// clients fail a topic's records on NOT_CONTROLLER.
func retriableTopicErrors(resp *kmsg.MetadataResponse) *kmsg.MetadataResponse {
	for i := range resp.Topics {
		switch resp.Topics[i].ErrorCode {
		case kerr.NotController.Code, kerr.RequestTimedOut.Code:
			resp.Topics[i].ErrorCode = kerr.LeaderNotAvailable.Code
		}
	}
	return resp
}
