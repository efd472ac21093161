package protocol

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/topics"
)

// A partition refused with NOT_LEADER_OR_FOLLOWER (or, in a fetch,
// FENCED_LEADER_EPOCH) names its current leader and epoch where the
// version carries them (KIP-951: Produce v10+, Fetch v12+, ShareFetch and
// ShareAcknowledge), with the leader's endpoint in the answer (Produce
// v10, Fetch v16), so the client goes there without first refreshing its
// metadata. A partition's leader and epoch are its raft group's: one
// answer can name several leaders, one per group.

// currentLeaders is what one answer says of the leaders. Owned by the
// answer's goroutine.
type currentLeaders struct {
	s *Server
	// groups are the leaders read, by group (lazily: most answers need
	// none).
	groups map[uint8]groupLeader
	// named are the leaders partitions named, in order: the answer
	// carries their endpoints.
	named []int32
}

// groupLeader is a raft group's leader (-1: none known) and term.
type groupLeader struct{ id, epoch int32 }

func (s *Server) newCurrentLeaders() *currentLeaders {
	return &currentLeaders{s: s, groups: map[uint8]groupLeader{}}
}

// of returns the current leader and epoch to answer for partition p of t
// (nil: unknown, answered as the metadata group's) whose error code is
// code ((-1, -1): none); fenced also points FENCED_LEADER_EPOCH at the
// leader.
func (l *currentLeaders) of(code int16, fenced bool, t *topics.Topic, p int32) (id, epoch int32) {
	if code != kerr.NotLeaderForPartition.Code && (!fenced || code != kerr.FencedLeaderEpoch.Code) {
		return -1, -1
	}
	g := groupOf(t, p)
	gl, ok := l.groups[g]
	if !ok {
		v := l.s.cluster.Group(g)
		gl = groupLeader{v.Leader(), v.LeaderEpoch()}
		l.groups[g] = gl
	}
	if gl.id < 0 {
		return -1, -1
	}
	if !slices.Contains(l.named, gl.id) {
		l.named = append(l.named, gl.id)
	}
	return gl.id, gl.epoch
}

// endpoints returns the addresses of the leaders partitions named.
func (l *currentLeaders) endpoints() []BrokerAddr {
	var out []BrokerAddr
	for _, id := range l.named {
		if b, ok := l.s.broker(id); ok {
			out = append(out, b)
		}
	}
	return out
}

// answeredTopic is the topic an answer names: by id when it has one
// (Produce v13+ and Fetch v13+ carry no name), else by name; nil when
// there is no such topic.
func (s *Server) answeredTopic(name string, id [16]byte) *topics.Topic {
	if id != ([16]byte{}) {
		return s.topics.GetByID(id)
	}
	return s.topics.Get(name)
}

// pointProduceAtLeader fills the current leader of every partition resp
// refuses as not led here.
func (s *Server) pointProduceAtLeader(r *Request, resp *kmsg.ProduceResponse) {
	if r.Version < 10 {
		return
	}
	leaders := s.newCurrentLeaders()
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		var t *topics.Topic // looked up at the topic's first refused partition
		for pi := range rt.Partitions {
			if p := &rt.Partitions[pi]; p.ErrorCode != 0 {
				if t == nil {
					t = s.answeredTopic(rt.Topic, rt.TopicID)
				}
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaders.of(p.ErrorCode, false, t, p.Partition)
			}
		}
	}
	if bs := leaders.endpoints(); len(bs) > 0 {
		for _, b := range bs {
			resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
		}
		r.advertiseListener(resp) // the leaders' addresses on the client's listener
	}
}

// pointFetchAtLeader is pointProduceAtLeader for a fetch answer, whose
// fenced partitions name the leader too.
func (s *Server) pointFetchAtLeader(r *Request, resp *kmsg.FetchResponse) {
	if r.Version < 12 {
		return
	}
	leaders := s.newCurrentLeaders()
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		var t *topics.Topic // looked up at the topic's first refused partition
		for pi := range rt.Partitions {
			if p := &rt.Partitions[pi]; p.ErrorCode != 0 {
				if t == nil {
					t = s.answeredTopic(rt.Topic, rt.TopicID)
				}
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaders.of(p.ErrorCode, true, t, p.Partition)
			}
		}
	}
	if bs := leaders.endpoints(); len(bs) > 0 && r.Version >= 16 {
		for _, b := range bs {
			resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
		}
		r.advertiseListener(resp)
	}
}
