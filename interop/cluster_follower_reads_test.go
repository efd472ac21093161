package interop_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterFollowerReads (KIP-392): nodes started with --rack report it
// in Metadata; a consumer whose client.rack is a follower's rack is
// pointed at that follower and reads every record from it (its fetch
// metrics grow, the leader's do not), in order, read_committed included;
// a consumer without a rack, or in the leader's, reads from the leader. A
// consumer at the log end keeps reading new records from the follower as
// they are produced.
func TestClusterFollowerReads(t *testing.T) {
	skipClusterInShort(t)
	metrics := map[int32]string{}
	c := brokertest.StartClusterPrepared(t, 3, func(n *brokertest.Node) {
		addr := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
		metrics[n.ID] = addr
		n.Args = append(n.Args, "--rack", fmt.Sprintf("rack-%d", n.ID), "--metrics-listen", addr)
	})
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	const topic = "follower-reads"
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(c.Seeds()...)))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	leader := c.LeaderID(t)
	var follower int32
	for _, id := range c.IDs() {
		if id != leader {
			follower = id
			break
		}
	}
	// Every node learns the others' racks.
	for _, id := range c.IDs() {
		cl := newClient(t, kgo.SeedBrokers(c.Node(id).Addr))
		testwait.For(t, fmt.Sprintf("node %d reports every rack", id), time.Minute, func() bool {
			req := kmsg.NewPtrMetadataRequest()
			resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
			if err != nil || len(resp.Brokers) != 3 {
				return false
			}
			for _, b := range resp.Brokers {
				if b.Rack == nil || *b.Rack != fmt.Sprintf("rack-%d", b.NodeID) {
					return false
				}
			}
			return true
		})
		cl.Close()
	}

	producer := newClusterClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.TransactionalID("follower-reads-txn"))
	defer producer.Close()
	var want []string
	produceTxn := func(prefix string, n int, commit bool) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			v := fmt.Sprintf("%s-%d", prefix, i)
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			if commit {
				want = append(want, v)
			}
		}
		if err := producer.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produceTxn("a", 50, true)
	produceTxn("aborted", 10, false)
	produceTxn("b", 50, true)

	fetched := func(id int32) float64 {
		sum := 0.0
		for _, line := range strings.Split(scrape(t, metrics[id]), "\n") {
			if strings.HasPrefix(line, "regent_partition_fetched_bytes_total{") && strings.Contains(line, `topic="`+topic+`"`) {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				sum += v
			}
		}
		return sum
	}
	// consume reads n records with a read_committed consumer in rack.
	consume := func(rack string, n int, more func()) []string {
		t.Helper()
		opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())}
		if rack != "" {
			opts = append(opts, kgo.Rack(rack))
		}
		cl := newClusterClient(t, c, opts...)
		defer cl.Close()
		var got []string
		for len(got) < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records: %v", len(got), n, ctx.Err())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
			for _, r := range fs.Records() {
				got = append(got, string(r.Value))
			}
			if more != nil && len(got) == len(want) {
				more()
				more = nil
			}
		}
		return got
	}
	check := func(got []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("read %d records, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("record %d is %q, want %q", i, got[i], want[i])
			}
		}
	}

	leaderBefore, followerBefore := fetched(leader), fetched(follower)
	check(consume(fmt.Sprintf("rack-%d", follower), len(want), nil))
	leaderAfter, followerAfter := fetched(leader), fetched(follower)
	t.Logf("consumer in rack-%d: follower %d fetched %.0f bytes, leader %d %.0f", follower, follower, followerAfter-followerBefore, leader, leaderAfter-leaderBefore)
	if followerAfter-followerBefore <= 0 || leaderAfter != leaderBefore {
		t.Fatalf("a consumer in the follower's rack read %.0f bytes from the follower and %.0f from the leader; want all from the follower", followerAfter-followerBefore, leaderAfter-leaderBefore)
	}

	// At the log end, new records keep coming from the follower.
	followerBefore = fetched(follower)
	prior := len(want)
	got := consume(fmt.Sprintf("rack-%d", follower), prior+20, func() { produceTxn("c", 20, true) })
	check(got)
	if fetched(follower) <= followerBefore {
		t.Fatalf("the tail was not read from the follower")
	}

	// librdkafka follows the preferred read replica too.
	if py := needPython(t, "confluent_kafka"); py != "" {
		leaderBefore, followerBefore = fetched(leader), fetched(follower)
		cmd := exec.CommandContext(ctx, py, "python/follower_reads.py", strings.Join(c.Seeds(), ","), topic, fmt.Sprintf("rack-%d", follower), strconv.Itoa(len(want)))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("librdkafka consumer: %v\n%s", err, out)
		}
		_, values, _ := strings.Cut(string(out), "VALUES\n")
		check(strings.Fields(values))
		if fetched(follower) <= followerBefore || fetched(leader) != leaderBefore {
			t.Fatalf("librdkafka in the follower's rack read %.0f bytes from the follower and %.0f from the leader", fetched(follower)-followerBefore, fetched(leader)-leaderBefore)
		}
	}

	// No rack, or the leader's: the leader serves.
	for _, rack := range []string{"", fmt.Sprintf("rack-%d", leader)} {
		leaderBefore, followerBefore = fetched(leader), fetched(follower)
		check(consume(rack, len(want), nil))
		if fetched(leader) <= leaderBefore || fetched(follower) != followerBefore {
			t.Fatalf("a consumer in rack %q did not read from the leader alone", rack)
		}
	}
}
