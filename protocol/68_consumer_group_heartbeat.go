package protocol

// ConsumerGroupHeartbeat: versions 0-1 (KIP-848; v1 has client-chosen
// member ids and regex subscriptions, matched against whole topic names
// with Go's RE2 syntax, which RE2J's mostly shares). Server-side assignors
// "uniform" (the default) and "range"; client-side assignors are not
// offered. Members of a classic group with members get GROUP_ID_NOT_FOUND
// (no online migration between protocols); an empty classic group is taken
// over, keeping its offsets.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(68, 0, 1, (*Server).consumerGroupHeartbeat) }

func (s *Server) consumerGroupHeartbeat(r *Request) {
	req := r.Msg.(*kmsg.ConsumerGroupHeartbeatRequest)
	if s.authz != nil {
		// Kafka's checks: READ on the group, DESCRIBE on every topic the
		// member subscribes to by name.
		code := int16(0)
		if !s.authorized(r, acls.Read, acls.Group, req.Group) {
			code = kerr.GroupAuthorizationFailed.Code
		} else {
			for _, t := range req.SubscribedTopicNames {
				if !s.authorized(r, acls.Describe, acls.Topic, t) {
					code = kerr.TopicAuthorizationFailed.Code
					break
				}
			}
		}
		if code != 0 {
			resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
			resp.ErrorCode = code
			r.Respond(resp)
			return
		}
	}
	s.groupsFor(req.Group).ConsumerGroupHeartbeat(req, groupClient(r), registryTopics{s, r}, func(resp *kmsg.ConsumerGroupHeartbeatResponse) {
		r.Respond(resp)
	})
}

// registryTopics shows consumer groups the topic registry (lock-free
// snapshots, safe from the group actors) and the internal topics: Kafka's
// broker-side regex resolution matches those too (only clients resolving
// a regex themselves skip topics Metadata marks internal). A regex
// resolves to the topics the heartbeating member's principal may DESCRIBE,
// as Kafka filters the topics its regexes resolve to by the context of the
// request that triggered the refresh. Safe from the group actors.
type registryTopics struct {
	s *Server
	r *Request
}

func (t registryTopics) Topic(name string) ([16]byte, int32, bool) {
	if it, ok := t.s.internalTopic(name); ok {
		return it.ID, it.Partitions, true
	}
	tp := t.s.topics.Get(name)
	if tp == nil {
		return [16]byte{}, 0, false
	}
	return tp.ID, int32(len(tp.Partitions)), true
}

func (t registryTopics) TopicNames() []string {
	all := t.s.topics.List()
	names := make([]string, 0, len(all)+2)
	for _, tp := range all {
		names = append(names, tp.Name)
	}
	for _, it := range t.s.internalTopics() {
		names = append(names, it.Name)
	}
	if t.s.authz == nil || t.r == nil {
		return names
	}
	allowed := names[:0]
	for _, n := range names {
		if t.s.authorizedQuiet(t.r, acls.Describe, acls.Topic, n) {
			allowed = append(allowed, n)
		}
	}
	return allowed
}
