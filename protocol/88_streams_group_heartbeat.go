package protocol

// StreamsGroupHeartbeat: version 0 (KIP-1071, the version Kafka 4.3's
// clients send). The group coordinator (actors/group/streams.go) keeps the
// topology, assigns tasks with a sticky assignor and reconciles members;
// this handler authorizes the request and creates the internal topics
// (repartition and changelog) the coordinator finds missing, as Kafka's
// broker does, in the background: the member is told
// MISSING_INTERNAL_TOPICS until they exist. As in Kafka 4.3, static
// membership, warmup tasks, task offsets and source-topic regexes are
// refused with INVALID_REQUEST. While streams.version is finalized at 0
// the streams APIs are neither advertised nor served (UNSUPPORTED_VERSION),
// as Kafka's brokers do.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/features"
	"github.com/regent-broker/regent/actors/group"
)

func init() { register(88, 0, 0, (*Server).streamsGroupHeartbeat) }

func (s *Server) streamsGroupHeartbeat(r *Request) {
	req := r.Msg.(*kmsg.StreamsGroupHeartbeatRequest)
	if !s.streamsOn() {
		resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		resp.ErrorMessage = kmsg.StringPtr("The streams group protocol is off: streams.version is finalized at 0 (kafka-features.sh upgrade --feature streams.version=1 turns it on).")
		r.Respond(resp)
		return
	}
	if s.authz != nil {
		// Kafka's checks: READ on the group; DESCRIBE on every topic a
		// joining member's topology names.
		code := int16(0)
		if !s.authorized(r, acls.Read, acls.Group, req.Group) {
			code = kerr.GroupAuthorizationFailed.Code
		} else if req.Topology != nil {
			for _, t := range topologyTopics(req.Topology) {
				if !s.authorized(r, acls.Describe, acls.Topic, t) {
					code = kerr.TopicAuthorizationFailed.Code
					break
				}
			}
		}
		if code != 0 {
			resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
			resp.ErrorCode = code
			r.Respond(resp)
			return
		}
	}
	s.groupsFor(req.Group).StreamsGroupHeartbeat(req, groupClient(r), registryTopics{s, r}, func(resp *kmsg.StreamsGroupHeartbeatResponse, create []group.StreamsTopicToCreate) {
		if len(create) > 0 {
			if denied := s.createStreamsTopics(r, create); len(denied) > 0 {
				resp.Status = append(resp.Status, kmsg.StreamsGroupHeartbeatResponseStatus{
					StatusCode:   3, // MISSING_INTERNAL_TOPICS
					StatusDetail: fmt.Sprintf("Unauthorized to CREATE on topics %s.", strings.Join(denied, ", ")),
				})
			}
		}
		r.Respond(resp)
	})
}

// streamsOn reports whether streams groups are served: streams.version is
// finalized at 1 or more (a new cluster starts at 1).
func (s *Server) streamsOn() bool {
	return s.features == nil || s.features.Finalized().Level(features.StreamsVersion) >= 1
}

// topologyTopics lists every topic a topology names.
func topologyTopics(t *kmsg.StreamsGroupHeartbeatRequestTopology) []string {
	var out []string
	for _, st := range t.Subtopologies {
		out = append(out, st.SourceTopics...)
		out = append(out, st.RepartitionSinkTopics...)
		for _, ti := range st.RepartitionSourceTopics {
			out = append(out, ti.Topic)
		}
		for _, ti := range st.StateChangelogTopics {
			out = append(out, ti.Topic)
		}
	}
	return out
}

// createStreamsTopics starts creating a streams group's missing internal
// topics (CREATE on the cluster or the topic, as CreateTopics checks) and
// returns the ones the client may not create. A topic already being
// created is not asked for again; the member's next heartbeat finds it.
func (s *Server) createStreamsTopics(r *Request, create []group.StreamsTopicToCreate) (denied []string) {
	var todo []group.StreamsTopicToCreate
	for _, c := range create {
		if s.authz != nil && !s.authorizedQuiet(r, acls.Create, acls.Cluster, acls.ClusterName) && !s.authorized(r, acls.Create, acls.Topic, c.Name) {
			denied = append(denied, c.Name)
			continue
		}
		if !s.streamsCreating.start(c.Name, time.Now()) {
			continue
		}
		todo = append(todo, c)
	}
	if len(todo) == 0 {
		return denied
	}
	// With coordinators spread over the nodes this one may not lead the
	// metadata group: the topics are created there, asked as the client.
	ask := forwardedAs(r, kmsg.NewPtrCreateTopicsRequest())
	go func() {
		for _, c := range todo {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.Name, c.Partitions, c.ReplicationFactor
			for k, v := range c.Configs {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
				rt.Configs = append(rt.Configs, cfg)
			}
			var err error
			if s.forwarder != nil && !s.cluster.Serving() {
				err = s.createStreamsTopicAtLeader(ask, rt)
			} else {
				_, err = s.createTopic(rt, false)
			}
			failed := false
			switch {
			case err == nil:
				s.log.Info("created streams group internal topic", "topic", c.Name, "partitions", c.Partitions)
			case errorCode(err) == kerr.TopicAlreadyExists.Code:
			default:
				// Members keep heartbeating with MISSING_INTERNAL_TOPICS;
				// the creation is tried again once streamsCreateRetry has
				// passed, not at each of their heartbeats.
				s.log.Warn("streams group internal topic not created", "topic", c.Name, "partitions", c.Partitions, "err", err)
				failed = true
			}
			s.streamsCreating.done(c.Name, failed, time.Now())
		}
	}()
	return denied
}

// createStreamsTopicAtLeader creates rt on the metadata group's leader,
// asked as ask's client.
func (s *Server) createStreamsTopicAtLeader(ask ForwardedRequest, rt kmsg.CreateTopicsRequestTopic) error {
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = autoCreateVersion
	ct.TimeoutMillis = int32(autoCreateWait / time.Millisecond)
	ct.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	ask.Key, ask.Version, ask.Body = ct.Key(), ct.Version, ct.AppendTo(nil)
	ctx, cancel := context.WithTimeout(context.Background(), autoCreateWait)
	defer cancel()
	body, _, err := s.forward(ctx, ask)
	if err != nil {
		return err
	}
	resp := ct.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(ct.Version)
	if err := decodeResponse(resp, body); err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return kerr.ErrorForCode(t.ErrorCode)
		}
	}
	return nil
}
