package interop_test

import (
	"bytes"
	"encoding/hex"
	"sort"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestClusterProduceTraceSpansEveryNode: in a 3-node cluster exporting to
// one OTLP receiver, a traced produce's storage span on the leader has a
// raft.apply child from every node that applied the write, so the
// request's trace crosses nodes.
func TestClusterProduceTraceSpansEveryNode(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	sink := &spanSink{}
	endpoint := startOTLPHTTP(t, sink)
	c := brokertest.StartCluster(t, 3, "--otel-exporter", "otlp-http", "--otel-endpoint", endpoint, "--otel-sample-ratio", "1")
	leader := c.WaitLeader(t, 60*time.Second)
	traceID, spanID := produceTraced(t, c.Node(leader).Addr, "traced-cluster", 3)
	_, _, _ = findProduceTree(t, sink, "traced-cluster", traceID, spanID)

	deadline := time.Now().Add(60 * time.Second)
	for {
		spans, _ := sink.snapshot()
		var storage []*tracepb.Span
		for _, s := range spans {
			if s.GetName() == "storage.append" && spanAttrs(s)["regent.replicator"].GetStringValue() == "raft" {
				storage = append(storage, s)
			}
		}
		for _, st := range storage {
			nodes := map[int64]*tracepb.Span{}
			for _, s := range spans {
				if s.GetName() == "raft.apply" && bytes.Equal(s.GetParentSpanId(), st.GetSpanId()) {
					if !bytes.Equal(s.GetTraceId(), st.GetTraceId()) {
						t.Fatalf("raft.apply span in trace %x, its parent in %x", s.GetTraceId(), st.GetTraceId())
					}
					nodes[spanAttrs(s)["regent.node.id"].GetIntValue()] = s
				}
			}
			if len(nodes) == 3 {
				var ids []int
				for id, s := range nodes {
					ids = append(ids, int(id))
					if a := spanAttrs(s); a["regent.raft.command"].GetStringValue() != "partition.append" {
						t.Errorf("node %d raft.apply command %v", id, a["regent.raft.command"])
					}
				}
				sort.Ints(ids)
				t.Logf("trace %s: storage.append on node %d has raft.apply children from nodes %v", hex.EncodeToString(st.GetTraceId()), leader, ids)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no storage.append span with raft.apply children from 3 nodes within 60s (%d raft storage spans, %d spans)", len(storage), len(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
