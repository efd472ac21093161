package interop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestACLClusterFailover: ACLs created through the leader of a 3-node
// cluster are replicated by raft and enforced by the next leader after the
// first is killed. (allow.everyone.if.no.acl.found=true lets the anonymous
// client manage ACLs: none names the cluster.)
func TestACLClusterFailover(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--authorizer", "acl", "--broker-config", "allow.everyone.if.no.acl.found=true")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	createClusterTopic(t, ctx, c, "locked", 1, 3)
	createClusterTopic(t, ctx, c, "free", 1, 3)
	adm := clusterAdmin(t, c)
	mustCreateACLs(t, ctx, adm, literal().Topics("locked").Deny("User:*").Operations(kadm.OpWrite))

	produce := func(topic string) error {
		cl := newClusterClient(t, c, kgo.RecordRetries(5))
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("locked"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to locked before the failover: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	first := c.LeaderID(t)
	c.Kill(first)
	second := c.WaitLeader(t, time.Minute)
	if second == first {
		t.Fatalf("node %d still leads after its kill", first)
	}
	if err := produce("free"); err != nil {
		t.Fatalf("produce to free on the new leader: %v", err)
	}
	if err := produce("locked"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to locked on the new leader %d: %v, want TOPIC_AUTHORIZATION_FAILED", second, err)
	}
	// Every live node holds the binding (DescribeAcls reads the local copy).
	for _, id := range c.LiveIDs() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(id).Addr))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp, err := req.RequestWith(ctx, cl)
		cl.Close()
		if err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 1 || resp.Resources[0].ResourceName != "locked" {
			t.Fatalf("node %d DescribeAcls: %v %+v", id, err, resp)
		}
	}
}
