package interop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterGroupConfigs: on a 3-node cluster a group config altered
// through a follower (forwarded to the leader) is described by every node
// and survives the leader's death: the next leader's coordinator tells the
// group's KIP-848 members the group's heartbeat interval.
func TestClusterGroupConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster: not in -short")
	}
	c := brokertest.StartCluster(t, 3)
	leader := c.WaitLeader(t, time.Minute)
	var follower *brokertest.Node
	for _, n := range c.Nodes() {
		if n.ID != leader {
			follower = n
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := func(addr string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "cgc"
	for k, v := range map[string]string{"consumer.heartbeat.interval.ms": "7000", "share.auto.offset.reset": "earliest"} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, cfg)
	}
	alter.Resources = append(alter.Resources, rr)
	// The follower's own broker: a request naming it goes to it.
	resp, err := alter.RequestWith(ctx, client(follower.Addr))
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter through node %d: %v %+v", follower.ID, err, resp)
	}
	describe := func(addr string) (string, error) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "cgc"
		dr.ConfigNames = []string{"consumer.heartbeat.interval.ms"}
		req.Resources = append(req.Resources, dr)
		cl := client(addr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return "", err
		}
		r := resp.Resources[0]
		if r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Value == nil {
			return "", fmt.Errorf("describe: %+v", r)
		}
		return *r.Configs[0].Value, nil
	}
	for _, n := range c.Nodes() {
		testwait.For(t, fmt.Sprintf("node %d describes cgc's interval", n.ID), 30*time.Second, func() bool {
			v, err := describe(n.Addr)
			return err == nil && v == "7000"
		})
	}
	heartbeat := func() (int32, error) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "cgc", "m-cgc-0123456789abcdef", 0, 60000
		req.SubscribedTopicNames = []string{"cgc-topic"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
		defer hcancel()
		resp, err := req.RequestWith(hctx, c.Client(t))
		if err != nil {
			return 0, err
		}
		if resp.ErrorCode != 0 {
			return 0, fmt.Errorf("error %d", resp.ErrorCode)
		}
		return resp.HeartbeatIntervalMillis, nil
	}
	if got, err := heartbeat(); err != nil || got != 7000 {
		t.Fatalf("heartbeat: %d %v, want 7000", got, err)
	}
	c.Kill(leader)
	testwait.For(t, "a new leader", 90*time.Second, func() bool {
		id := c.WaitLeader(t, 90*time.Second)
		return id != leader
	})
	var got int32
	testwait.For(t, "the new leader's coordinator gives cgc's interval", 60*time.Second, func() bool {
		got, err = heartbeat()
		if err != nil || got != 7000 {
			t.Logf("heartbeat after failover: %d %v", got, err)
		}
		return err == nil && got == 7000
	})
}
