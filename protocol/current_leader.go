package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A partition refused with NOT_LEADER_OR_FOLLOWER (or, in a fetch,
// FENCED_LEADER_EPOCH) names its current leader and epoch where the
// version carries them (KIP-951: Produce v10+, Fetch v12+, ShareFetch and
// ShareAcknowledge), with the leader's endpoint in the answer (Produce
// v10, Fetch v16), so the client goes there without first refreshing its
// metadata. One raft group leads every partition: the leader is the
// cluster's.

// currentLeaders is what one answer says of the leader. Owned by the
// answer's goroutine.
type currentLeaders struct {
	s      *Server
	looked bool // leader was read (lazily: most answers need none)
	leader int32
	need   bool // a partition named the leader: the answer carries its endpoint
}

func (s *Server) newCurrentLeaders() *currentLeaders { return &currentLeaders{s: s} }

// of returns the current leader and epoch to answer for a partition whose
// error code is code ((-1, -1): none); fenced also points FENCED_LEADER_EPOCH
// at the leader.
func (l *currentLeaders) of(code int16, fenced bool) (id, epoch int32) {
	if code != kerr.NotLeaderForPartition.Code && (!fenced || code != kerr.FencedLeaderEpoch.Code) {
		return -1, -1
	}
	if !l.looked {
		l.leader, l.looked = l.s.cluster.Leader(), true
	}
	if l.leader < 0 {
		return -1, -1
	}
	l.need = true
	return l.leader, l.s.cluster.LeaderEpoch()
}

// endpoint returns the leader's address when a partition named it.
func (l *currentLeaders) endpoint() (BrokerAddr, bool) {
	if !l.need {
		return BrokerAddr{}, false
	}
	return l.s.broker(l.leader)
}

// pointProduceAtLeader fills the current leader of every partition resp
// refuses as not led here.
func (s *Server) pointProduceAtLeader(r *Request, resp *kmsg.ProduceResponse) {
	if r.Version < 10 {
		return
	}
	leaders := s.newCurrentLeaders()
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			if p := &resp.Topics[ti].Partitions[pi]; p.ErrorCode != 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaders.of(p.ErrorCode, false)
			}
		}
	}
	if b, ok := leaders.endpoint(); ok {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
		r.advertiseListener(resp) // the leader's address on the client's listener
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
		for pi := range resp.Topics[ti].Partitions {
			if p := &resp.Topics[ti].Partitions[pi]; p.ErrorCode != 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = leaders.of(p.ErrorCode, true)
			}
		}
	}
	if b, ok := leaders.endpoint(); ok && r.Version >= 16 {
		resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
		r.advertiseListener(resp)
	}
}
