package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A partition refused with NOT_LEADER_OR_FOLLOWER (or, in a fetch,
// FENCED_LEADER_EPOCH) names its current leader and epoch where the
// version carries them (KIP-951: Produce v10+, Fetch v12+, with the
// leader's endpoint from Produce v10 and Fetch v16), so the client goes
// there without first refreshing its metadata. One raft group leads every
// partition: the leader is the cluster's.

// currentLeader returns the leader to point clients at, if one is known
// and has an address.
func (s *Server) currentLeader() (BrokerAddr, int32, bool) {
	id := s.cluster.Leader()
	if id < 0 {
		return BrokerAddr{}, -1, false
	}
	b, ok := s.broker(id)
	return b, s.cluster.LeaderEpoch(), ok
}

// pointProduceAtLeader fills the current leader of every partition resp
// refuses as not led here.
func (s *Server) pointProduceAtLeader(r *Request, resp *kmsg.ProduceResponse) {
	if r.Version < 10 {
		return
	}
	var b BrokerAddr
	var epoch int32
	looked, pointed := false, false
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			p := &resp.Topics[ti].Partitions[pi]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if !looked {
				var ok bool
				b, epoch, ok = s.currentLeader()
				if !ok {
					return
				}
				looked = true
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = b.ID, epoch
			pointed = true
		}
	}
	if pointed {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
		r.advertiseListener(resp) // the leader's address on the client's listener
	}
}

// pointFetchAtLeader is pointProduceAtLeader for a fetch answer.
func (s *Server) pointFetchAtLeader(r *Request, resp *kmsg.FetchResponse) {
	version := r.Version
	if version < 12 {
		return
	}
	var b BrokerAddr
	var epoch int32
	looked, pointed := false, false
	for ti := range resp.Topics {
		for pi := range resp.Topics[ti].Partitions {
			p := &resp.Topics[ti].Partitions[pi]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code && p.ErrorCode != kerr.FencedLeaderEpoch.Code {
				continue
			}
			if !looked {
				var ok bool
				b, epoch, ok = s.currentLeader()
				if !ok {
					return
				}
				looked = true
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = b.ID, epoch
			pointed = true
		}
	}
	if pointed && version >= 16 {
		resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port})
		r.advertiseListener(resp)
	}
}
