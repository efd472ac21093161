package interop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterQuotaSetAtFollower: AlterClientQuotas sent to a follower of
// a 3-node cluster is forwarded to the leader and replicated: every node
// describes the quota, and the leader throttles a producer with that
// client id (and mutes its connection) while another client id is not.
func TestClusterQuotaSetAtFollower(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	leader := c.LeaderID(t)
	f := followerOf(c, leader)
	fcl := followerClient(t, c.Node(f).Addr)

	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = append(req.Entries, quotaEntry(quotaEntity("client-id", "cluster-limited"), quotaOp{key: "producer_byte_rate", value: 10240}))
	resp := followerRequest(t, ctx, fcl, req).(*kmsg.AlterClientQuotasResponse)
	if len(resp.Entries) != 1 || resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("AlterClientQuotas at follower %d: %+v", f, resp.Entries)
	}
	for _, id := range c.IDs() {
		cl := followerClient(t, c.Node(id).Addr)
		testwait.For(t, fmt.Sprintf("node %d describes the quota", id), 30*time.Second, func() bool {
			d := kmsg.NewPtrDescribeClientQuotasRequest()
			d.Components = append(d.Components, quotaComp("client-id", kmsg.QuotasMatchTypeExact, qstr("cluster-limited")))
			r := followerRequest(t, ctx, cl, d).(*kmsg.DescribeClientQuotasResponse)
			return r.ErrorCode == 0 && len(r.Entries) == 1 && len(r.Entries[0].Values) == 1 &&
				r.Entries[0].Values[0].Key == "producer_byte_rate" && r.Entries[0].Values[0].Value == 10240
		})
	}

	// On the leader: 120 KiB against 10 KiB/s over a fresh sensor's 10 s
	// is a 2 s throttle; the other client id is not throttled.
	deadline := time.Now().Add(30 * time.Second)
	limited := dialRaw(t, c.Node(leader).Addr, "cluster-limited")
	other := dialRaw(t, c.Node(leader).Addr, "cluster-other")
	pr, at, err := limited.send(rawProduce(120<<10), deadline)
	if err != nil {
		t.Fatal(err)
	}
	th := time.Duration(pr.(*kmsg.ProduceResponse).ThrottleMillis) * time.Millisecond
	if th < 1900*time.Millisecond || th > 2100*time.Millisecond {
		t.Fatalf("leader %d: throttle %v, want 2 s", leader, th)
	}
	or, _, err := other.send(rawProduce(120<<10), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if ms := or.(*kmsg.ProduceResponse).ThrottleMillis; ms != 0 {
		t.Fatalf("leader %d throttled an unlimited client %d ms", leader, ms)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	_, next, err := limited.send(av, deadline)
	if err != nil {
		t.Fatal(err)
	}
	if waited := next.Sub(at); waited < th-50*time.Millisecond {
		t.Fatalf("leader %d answered the throttled connection's next request after %v (throttle %v)", leader, waited, th)
	}
	t.Logf("set at follower %d; leader %d throttled %v and muted the connection", f, leader, th)
}
