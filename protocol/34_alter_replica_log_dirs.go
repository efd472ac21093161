package protocol

// AlterReplicaLogDirs: versions 1-2, as Kafka 4 serves them (v0 was
// removed by KIP-896). Moves replicas between a broker's log dirs. A
// Regent node has one log dir, its data directory (DescribeLogDirs
// reports it by absolute path), so every replica already lives where it
// can be moved to: naming that dir is done at once (NONE), as Kafka
// answers a move to the dir a replica is in; any other path is
// LOG_DIR_NOT_FOUND, as Kafka answers a dir it does not have. A partition
// this node does not hold is REPLICA_NOT_AVAILABLE (Kafka's answer for a
// replica not on the broker). The request concerns the node it is sent to
// (kafka-reassign-partitions sends it to each replica's broker), so a
// cluster follower answers for its own dir, without forwarding.
// ACLs: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for
// every partition.

import (
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
)

func init() { register(34, 1, 2, (*Server).alterReplicaLogDirs) }

func (s *Server) alterReplicaLogDirs(r *Request) {
	req := r.Msg.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	denied := !s.authorizedCluster(r, acls.Alter)
	dir := s.logDirPath()

	// A partition named under two dirs is answered once, for the last
	// dir naming it, as Kafka keeps one destination per partition.
	type tp struct {
		topic     string
		partition int32
	}
	dest := map[tp]string{}
	var order []tp
	for _, rd := range req.Dirs {
		for _, rt := range rd.Topics {
			for _, p := range rt.Partitions {
				k := tp{rt.Topic, p}
				if _, seen := dest[k]; !seen {
					order = append(order, k)
				}
				dest[k] = rd.Dir
			}
		}
	}
	topicAt := map[string]int{}
	for _, k := range order {
		var err *kerr.Error
		switch {
		case denied:
			err = kerr.ClusterAuthorizationFailed
		case dest[k] != dir:
			err = kerr.LogDirNotFound
		case s.topics.Partition(k.topic, k.partition) == nil:
			err = kerr.ReplicaNotAvailable
		}
		var code int16
		if err != nil {
			code = err.Code
		}
		addLogDirPartition(resp, topicAt, k.topic, k.partition, code)
	}
	r.Respond(resp)
}

// addLogDirPartition answers one partition in resp, under its topic's
// entry (made at first use; topicAt maps topics to their index).
func addLogDirPartition(resp *kmsg.AlterReplicaLogDirsResponse, topicAt map[string]int, topic string, partition int32, code int16) {
	i, ok := topicAt[topic]
	if !ok {
		i = len(resp.Topics)
		topicAt[topic] = i
		t := kmsg.NewAlterReplicaLogDirsResponseTopic()
		t.Topic = topic
		resp.Topics = append(resp.Topics, t)
	}
	p := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
	p.Partition, p.ErrorCode = partition, code
	resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
}

// logDirPath is this node's one log dir as DescribeLogDirs reports it and
// AlterReplicaLogDirs expects it: the data directory's absolute path.
func (s *Server) logDirPath() string {
	dir, err := filepath.Abs(s.cfg.DataDir)
	if err != nil {
		return s.cfg.DataDir
	}
	return dir
}
