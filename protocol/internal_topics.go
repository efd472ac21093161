package protocol

// Internal topics: __consumer_offsets and __transaction_state, shown as
// Kafka shows them. Regent keeps the group and transaction coordinators'
// state in their own stores (actors/group and actors/txn: recordlog
// key/value frames, not Kafka record batches), so these two topics exist
// as metadata only:
//
//   - Metadata (all versions, named or all topics) and
//     DescribeTopicPartitions list them with is_internal=true, their
//     partition counts from offsets.topic.num.partitions and
//     transaction.state.log.num.partitions, each partition led by the node
//     FindCoordinator names for the keys hashed to it;
//   - DescribeConfigs describes them (cleanup.policy=compact, as Kafka
//     creates them);
//   - KIP-848 regex subscriptions resolved by the broker match them, as
//     Kafka's do (clients resolving a regex themselves skip topics that
//     Metadata marks internal);
//   - Produce answers INVALID_TOPIC_EXCEPTION "Cannot append to internal
//     topic", Kafka's answer to clients;
//   - Fetch and ListOffsets answer INVALID_TOPIC_EXCEPTION: Kafka serves the
//     coordinators' records there, Regent has none in Kafka's format and
//     does not make any up (a non-retriable error, so consumers assigned
//     these partitions report it instead of retrying forever);
//   - CreateTopics answers TOPIC_ALREADY_EXISTS (they always exist);
//   - DeleteTopics answers INVALID_TOPIC_EXCEPTION: the stores behind them
//     are not topics, and deleting them would drop every group's offsets
//     and every transaction (Kafka's tools refuse it client-side).

import (
	"crypto/sha256"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/storage/logconfig"
)

const (
	offsetsTopic  = "__consumer_offsets"
	txnStateTopic = "__transaction_state"
)

// internalTopic is one internal topic as this node shows it.
type internalTopic struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Configs are its topic-level overrides, as Kafka creates the topic.
	Configs map[string]string
}

// isInternalTopic reports whether name is one of Kafka's internal topics
// Regent shows.
func isInternalTopic(name string) bool {
	return name == offsetsTopic || name == txnStateTopic
}

// internalTopic returns the internal topic named name.
func (s *Server) internalTopic(name string) (internalTopic, bool) {
	var countKey string
	switch name {
	case offsetsTopic:
		countKey = "offsets.topic.num.partitions"
	case txnStateTopic:
		countKey = "transaction.state.log.num.partitions"
	default:
		return internalTopic{}, false
	}
	return internalTopic{
		Name:       name,
		ID:         internalTopicID(s.cluster.ClusterID(), name),
		Partitions: brokerInt32(s.topics.Broker(), countKey),
		Configs:    map[string]string{"cleanup.policy": "compact"},
	}, true
}

// internalTopicByID returns the internal topic whose id is id.
func (s *Server) internalTopicByID(id [16]byte) (internalTopic, bool) {
	for _, it := range s.internalTopics() {
		if it.ID == id {
			return it, true
		}
	}
	return internalTopic{}, false
}

// internalTopics lists both internal topics, by name.
func (s *Server) internalTopics() []internalTopic {
	a, _ := s.internalTopic(offsetsTopic)
	b, _ := s.internalTopic(txnStateTopic)
	return []internalTopic{a, b}
}

// internalPartitionLeader is the node leading partition p of an internal
// topic: the coordinator of the groups or transactional ids hashed to it.
// FindCoordinator names the cluster's leader for every key today (one raft
// group coordinates everything), so that is every partition's leader; when
// coordinators are placed by hash, this and FindCoordinator must change
// together (TestInternalTopicLeaderIsCoordinator ties them).
func (s *Server) internalPartitionLeader(p int32) int32 {
	return s.cluster.Leader()
}

// internalTopicID is the internal topic's id: derived from the cluster id
// and the name, so every node and every restart report the same id
// without storing one.
func internalTopicID(clusterID, name string) [16]byte {
	sum := sha256.Sum256([]byte("regent internal topic\x00" + clusterID + "\x00" + name))
	var id [16]byte
	copy(id[:], sum[:16])
	if id == ([16]byte{}) {
		id[15] = 1 // the zero uuid means "no id"
	}
	return id
}

// brokerInt32 is the broker config key's value in force: its override,
// else its default (logconfig's def, the one DescribeConfigs reports).
// Keys read here are read-only, validated (>= 1) at start.
func brokerInt32(b logconfig.Broker, key string) int32 {
	if v, ok := b.Overrides[key]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > 0 {
			return int32(n)
		}
	}
	d, ok := logconfig.LookupBroker(key)
	if !ok {
		panic(fmt.Sprintf("broker config %s is not defined", key))
	}
	n, err := strconv.ParseInt(d.Default, 10, 32)
	if err != nil || n < 1 {
		panic(fmt.Sprintf("broker config %s has default %q, not a positive int", key, d.Default))
	}
	return int32(n)
}

// internalTopicMetadata is Metadata's answer for an internal topic: every
// voter a replica, as for other topics, each partition led by its
// coordinator.
func (s *Server) internalTopicMetadata(r *Request, req *kmsg.MetadataRequest, it internalTopic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := it.Name
	mt.Topic, mt.TopicID, mt.IsInternal = &name, it.ID, true
	if req.IncludeTopicAuthorizedOperations && s.authz != nil {
		mt.AuthorizedOperations = s.authorizedOps(r, acls.Topic, it.Name, topicOperations)
	}
	voters, isr, epoch := s.cluster.Voters(), s.cluster.InSync(), s.cluster.LeaderEpoch()
	for p := int32(0); p < it.Partitions; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.LeaderEpoch = p, epoch
		mp.Leader = s.internalPartitionLeader(p)
		if _, ok := s.broker(mp.Leader); !ok {
			mp.Leader, mp.ErrorCode = -1, kerr.LeaderNotAvailable.Code
		}
		mp.Replicas, mp.ISR = voters, isr
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// internalProduceTarget names the internal topic a produce request's topic
// is (by name, or by id from v13), or "" for any other topic.
func (s *Server) internalProduceTarget(version int16, rt kmsg.ProduceRequestTopic) string {
	if version >= 13 {
		if it, ok := s.internalTopicByID(rt.TopicID); ok {
			return it.Name
		}
		return ""
	}
	if isInternalTopic(rt.Topic) {
		return rt.Topic
	}
	return ""
}
