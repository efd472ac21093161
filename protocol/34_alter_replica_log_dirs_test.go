package protocol

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAlterReplicaLogDirs: the node's one dir (as DescribeLogDirs names
// it) is accepted for every partition it holds, at v1 and v2; another
// path is LOG_DIR_NOT_FOUND; a partition it does not hold is
// REPLICA_NOT_AVAILABLE; a partition named under two dirs is answered
// once, for the last; without ALTER on the cluster every partition is
// CLUSTER_AUTHORIZATION_FAILED.
func TestAlterReplicaLogDirs(t *testing.T) {
	alter := func(s *Server, version int16, dirs map[string][]int32, order ...string) *kmsg.AlterReplicaLogDirsResponse {
		t.Helper()
		req := kmsg.NewPtrAlterReplicaLogDirsRequest()
		req.Version = version
		for _, d := range order {
			rd := kmsg.NewAlterReplicaLogDirsRequestDir()
			rd.Dir = d
			for _, topic := range []string{"t", "nope"} {
				rt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
				rt.Topic = topic
				if topic == "t" {
					rt.Partitions = dirs[d]
				} else if d == order[0] {
					rt.Partitions = []int32{0}
				} else {
					continue
				}
				rd.Topics = append(rd.Topics, rt)
			}
			req.Dirs = append(req.Dirs, rd)
		}
		return call[*kmsg.AlterReplicaLogDirsResponse](t, s, req)
	}
	check := func(resp *kmsg.AlterReplicaLogDirsResponse, want map[string]map[int32]*kerr.Error) {
		t.Helper()
		got := 0
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				w, ok := want[rt.Topic][p.Partition]
				if !ok {
					t.Fatalf("%s-%d answered, not asked", rt.Topic, p.Partition)
				}
				code(t, rt.Topic, p.ErrorCode, w)
				got++
			}
		}
		n := 0
		for _, ps := range want {
			n += len(ps)
		}
		if got != n {
			t.Fatalf("%d partitions answered, want %d: %+v", got, n, resp.Topics)
		}
	}

	s := groupServer(t)
	s.cfg.DataDir = t.TempDir()
	here, _ := filepath.Abs(s.cfg.DataDir)
	for _, v := range []int16{1, 2} {
		// 7 is not a partition of t (3 partitions); "nope" is no topic.
		resp := alter(s, v, map[string][]int32{here: {0, 1, 7}, "/elsewhere": {2}}, here, "/elsewhere")
		check(resp, map[string]map[int32]*kerr.Error{
			"t":    {0: nil, 1: nil, 7: kerr.ReplicaNotAvailable, 2: kerr.LogDirNotFound},
			"nope": {0: kerr.ReplicaNotAvailable},
		})
	}
	// Partition 1 under both dirs: the last one named decides.
	resp := alter(s, 2, map[string][]int32{here: {1}, "/elsewhere": {1, 2}}, here, "/elsewhere")
	check(resp, map[string]map[int32]*kerr.Error{"t": {1: kerr.LogDirNotFound, 2: kerr.LogDirNotFound}, "nope": {0: kerr.ReplicaNotAvailable}})
	resp = alter(s, 2, map[string][]int32{"/elsewhere": {1}, here: {1}}, "/elsewhere", here)
	// "nope" is under /elsewhere now: the dir is checked first, as Kafka does.
	check(resp, map[string]map[int32]*kerr.Error{"t": {1: nil}, "nope": {0: kerr.LogDirNotFound}})

	// With an authorizer and no ACL allowing ALTER on the cluster.
	var allowAll atomic.Bool
	as, _, _ := aclServer(t, &allowAll)
	as.cfg.DataDir = s.cfg.DataDir
	resp = alter(as, 2, map[string][]int32{here: {0}}, here)
	check(resp, map[string]map[int32]*kerr.Error{"t": {0: kerr.ClusterAuthorizationFailed}, "nope": {0: kerr.ClusterAuthorizationFailed}})
}
