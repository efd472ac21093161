package interop_test

import (
	"context"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestClusterPipeliningProducer: librdkafka (python3-confluent-kafka) with
// its default pipelining (a million requests in flight per connection, no
// idempotence) produces 512 KiB records, one per request, at acks=all to a
// 3-node cluster, faster than the leader commits them. The leader pushes
// back (the connection is handed off the event loop and its reads wait
// for answers and for the request budget) instead of closing it: every record is delivered once, in order, read
// back byte for byte, and no node closed a connection for its input.
// Before, the leader closed the connection for its input or for the
// budget, the producer reconnected and sent it all again, and almost
// nothing was delivered (0 of 200 here in 120 s; librdkafka's own
// 0041_fetch_max_bytes: 1 of 978 records in 35 s).
func TestClusterPipeliningProducer(t *testing.T) {
	py := needPython(t, "confluent_kafka")
	// A request budget of 48 MiB, less than the 64 MiB of 128 such
	// requests in flight: the producer fills it with its own requests and
	// must wait for their answers; it sends 100 MiB in all.
	c := brokertest.StartCluster(t, 3, "--max-memory", "128MiB")
	c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "python/pipeline_flood.py", strings.Join(c.Seeds(), ","), "pipeline-flood", "200", "524288").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("pipelining producer: %v", err)
	}
	handedOff := 0
	for _, n := range c.Nodes() {
		log := n.LogTail(math.MaxInt)
		for _, closed := range []string{"input floods past in-flight limit", "request memory budget spent"} {
			if strings.Contains(log, closed) {
				t.Fatalf("node %d closed a connection: %q", n.ID, closed)
			}
		}
		handedOff += strings.Count(log, "its socket leaves the event loop")
	}
	if handedOff == 0 {
		t.Fatal("no connection was handed off: the producer never outran the leader, so backpressure was not exercised")
	}
	t.Logf("%d connections handed off the event loop", handedOff)
}
