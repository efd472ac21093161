package interop_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterMetadataPerListener: on a 3-node cluster whose nodes have a
// PLAINTEXT and a SASL_PLAINTEXT listener, Metadata and DescribeCluster
// asked on any node's SASL_PLAINTEXT listener name every node at its
// SASL_PLAINTEXT address (as Kafka answers per listener), and on a
// PLAINTEXT listener at its PLAINTEXT address; a SCRAM client seeded with
// one node reaches the others (a produce to a partition led elsewhere
// would fail on a PLAINTEXT address with ILLEGAL_SASL_STATE).
func TestClusterMetadataPerListener(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster: not in -short")
	}
	c := brokertest.StartClusterListeners(t, 3, []string{"SASL_PLAINTEXT"}, "--sasl-mechanisms", "SCRAM-SHA-512")
	c.WaitLeader(t, time.Minute)
	kgoSCRAMEnv(t, c.Seeds()[0], "") // creates the kgo user through the PLAINTEXT listener
	want := func(name string) []string {
		var out []string
		for _, n := range c.Nodes() {
			if name == "" {
				out = append(out, n.Addr)
			} else {
				out = append(out, n.Listeners[name])
			}
		}
		slices.Sort(out)
		return out
	}
	brokers := func(cl *kgo.Client, addr string) ([]string, []string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return nil, nil, err
		}
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil {
			return nil, nil, err
		}
		var a, b []string
		for _, x := range md.Brokers {
			a = append(a, net.JoinHostPort(x.Host, strconv.Itoa(int(x.Port))))
		}
		for _, x := range dc.Brokers {
			b = append(b, net.JoinHostPort(x.Host, strconv.Itoa(int(x.Port))))
		}
		slices.Sort(a)
		slices.Sort(b)
		return a, b, nil
	}
	for _, n := range c.Nodes() {
		for _, l := range []struct{ name, addr string }{{"", n.Addr}, {"SASL_PLAINTEXT", n.Listeners["SASL_PLAINTEXT"]}} {
			opts := []kgo.Opt{kgo.SeedBrokers(l.addr)}
			if l.name != "" {
				opts = append(opts, kgo.SASL(scram.Auth{User: "kgo", Pass: "kgo-pass"}.AsSha512Mechanism()))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			exp := want(l.name)
			var md, dc []string
			var lastErr error
			// The node learns its peers' listeners from their admin
			// endpoints within a second or so of starting.
			testwait.For(t, fmt.Sprintf("node %d listener %q names every node on it", n.ID, l.name), 30*time.Second, func() bool {
				md, dc, lastErr = brokers(cl, l.addr)
				return lastErr == nil && slices.Equal(md, exp) && slices.Equal(dc, exp)
			})
			cl.Close()
		}
	}
	// Produce through one node's SASL listener to a topic led by the
	// leader: the client follows Metadata to the leader's SASL listener.
	seed := c.Nodes()[len(c.Nodes())-1].Listeners["SASL_PLAINTEXT"]
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.SASL(scram.Auth{User: "kgo", Pass: "kgo-pass"}.AsSha512Mechanism()),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("per-listener"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce over SASL_PLAINTEXT via %s: %v", seed, err)
	}
	// A follower refusing a produce names the leader at the leader's
	// address on the client's listener (KIP-951 node endpoints).
	leader := c.LeaderID(t)
	var follower int32
	for _, n := range c.Nodes() {
		if n.ID != leader {
			follower = n.ID
		}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "per-listener"
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("per-listener")
	mreq.Topics = append(mreq.Topics, mt)
	md, err := mreq.RequestWith(ctx, cl)
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("metadata of per-listener: %v", err)
	}
	rt.TopicID = md.Topics[0].TopicID // kgo may send v13+, which names topics by id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = plainBatch([]string{"to a follower"})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(follower)))
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != leader || len(resp.Brokers) != 1 ||
		net.JoinHostPort(resp.Brokers[0].Host, strconv.Itoa(int(resp.Brokers[0].Port))) != c.Node(leader).Listeners["SASL_PLAINTEXT"] {
		t.Fatalf("produce to follower %d: %+v, brokers %+v; want NOT_LEADER_OR_FOLLOWER naming leader %d at %s", follower, p, resp.Brokers, leader, c.Node(leader).Listeners["SASL_PLAINTEXT"])
	}
}
