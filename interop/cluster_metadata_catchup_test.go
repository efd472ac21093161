package interop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestClusterFollowerMetadataAfterCreate: a topic created on the leader is
// asked for on a follower at once, as a client that created it through one
// node and then asks another does (librdkafka's tests do, and failed with
// "Unknown partition"). The follower catches up with the leader before it
// calls a named topic unknown, so it never answers
// UNKNOWN_TOPIC_OR_PARTITION for a topic the leader already created (it may
// answer LEADER_NOT_AVAILABLE, which clients retry); a topic nobody
// created is still unknown.
func TestClusterFollowerMetadataAfterCreate(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: not in -short")
	}
	c := brokertest.StartCluster(t, 3)
	leader := c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc := followerClient(t, c.Node(leader).Addr) // requests to the leader's own connection
	fc := followerClient(t, c.Node(followerOf(c, leader)).Addr)
	meta := func(topic string) int16 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp := followerRequest(t, ctx, fc, req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("Metadata %s: %d topics answered", topic, len(resp.Topics))
		}
		return resp.Topics[0].ErrorCode
	}
	const rounds = 30
	retriable := 0
	for i := range rounds {
		topic := fmt.Sprintf("catch-up-%d", i)
		if code := createTopicAt(t, ctx, lc, topic, 30000); code != 0 {
			t.Fatalf("CreateTopics %s on the leader: %v", topic, kerr.ErrorForCode(code))
		}
		switch code := meta(topic); code {
		case 0:
		case kerr.LeaderNotAvailable.Code:
			retriable++
		default:
			t.Fatalf("round %d: the follower answered %s for a topic the leader created: %v", i, topic, kerr.ErrorForCode(code))
		}
	}
	if code := meta("never-created"); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("a topic nobody created: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	t.Logf("%d topics created on the leader and asked for on a follower at once: known %d times, LEADER_NOT_AVAILABLE %d times, never unknown",
		rounds, rounds-retriable, retriable)
}
