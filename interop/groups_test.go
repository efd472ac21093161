package interop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestGroupOffsetsSurviveKill9 consumes part of a topic with a kgo group
// consumer, commits, kills the broker with SIGKILL and restarts it: the
// committed offsets (and a simple, membership-less commit) must be there,
// the group must come back with its member, and a rejoining consumer must
// resume exactly where the commit left off. Once with the classic
// protocol, once with KIP-848's.
func TestGroupOffsetsSurviveKill9(t *testing.T) {
	t.Run("classic", func(t *testing.T) { testGroupOffsetsSurviveKill9(t, false) })
	t.Run("kip848", func(t *testing.T) { testGroupOffsetsSurviveKill9(t, true) })
}

func testGroupOffsetsSurviveKill9(t *testing.T, kip848 bool) {
	const (
		partitions = 4
		records    = 2000
		firstRead  = 1200
		group      = "kill9-group"
		simple     = "kill9-simple"
	)
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topic := "groups-kill9"
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < records; i++ {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("produce: %v", err)
	}
	prod.Close()

	newConsumer := func() *kgo.Client {
		opts := []kgo.Opt{
			kgo.SeedBrokers(b.Addr),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(),
			kgo.SessionTimeout(6 * time.Second),
			kgo.FetchMaxWait(200 * time.Millisecond),
		}
		if kip848 {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}

	// First consumer: read at least firstRead records, commit them.
	c1 := newConsumer()
	defer c1.Close()
	seen := map[int32]int64{} // next offset to read, per partition
	n := 0
	for n < firstRead {
		fs := c1.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d before the deadline", n, firstRead)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[r.Partition] = r.Offset + 1
			n++
		})
	}
	if err := c1.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed := map[int32]int64{}
	for p, o := range c1.CommittedOffsets()[topic] {
		committed[p] = o.Offset
	}
	for p, o := range seen {
		if committed[p] != o {
			t.Fatalf("partition %d: committed %d, consumed up to %d", p, committed[p], o)
		}
	}
	member, epoch := describeMember(t, ctx, b.Addr, group, kip848)

	// A commit without membership, as Flink's source and admin tools do.
	var simpleOffsets kadm.Offsets
	simpleOffsets.AddOffset(topic, 0, 77, -1)
	simpleOffsets.AddOffset(topic, 3, 1234, 5)
	if err := namesOnlyAdmin(t, b.Addr).CommitAllOffsets(ctx, simple, simpleOffsets); err != nil {
		t.Fatalf("simple commit: %v", err)
	}

	b.Kill()
	b.Restart()

	adm = newAdmin(t, b.Addr)
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets after restart: %v", err)
	}
	for p := int32(0); p < partitions; p++ {
		want, ok := committed[p]
		got, found := fetched.Lookup(topic, p)
		switch {
		case !ok && found && got.At >= 0:
			t.Fatalf("partition %d: offset %d after restart, none committed", p, got.At)
		case ok && (!found || got.Err != nil || got.At != want):
			t.Fatalf("partition %d: offset %+v after restart, want %d", p, got, want)
		}
	}
	sf, err := adm.FetchOffsets(ctx, simple)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := sf.Lookup(topic, 0); o.At != 77 {
		t.Fatalf("simple commit p0 after restart: %+v", o)
	}
	if o, _ := sf.Lookup(topic, 3); o.At != 1234 || o.LeaderEpoch != 5 {
		t.Fatalf("simple commit p3 after restart: %+v", o)
	}
	if m, e := describeMember(t, ctx, b.Addr, group, kip848); m != member || e != epoch {
		t.Fatalf("group after restart: member %s epoch %d, before: %s %d", m, e, member, epoch)
	}

	// The first consumer leaves (its client reconnects to the restarted
	// broker); a new one resumes from the commits.
	c1.Close()
	c2 := newConsumer()
	defer c2.Close()
	next := map[int32]int64{}
	for p, o := range committed {
		next[p] = o
	}
	rest := records - n
	got := 0
	for got < rest {
		fs := c2.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			t.Fatalf("second consumer read %d of %d before the deadline", got, rest)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: resumed at offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			got++
		})
	}
	if err := c2.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	end, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	end.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != records {
		t.Fatalf("committed offsets sum to %d, want %d", total, records)
	}
}

// describeMember returns the one member of a stable group and its epoch
// (the generation is not described for classic groups: -1).
func describeMember(t *testing.T, ctx context.Context, addr string, group string, kip848 bool) (string, int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if !kip848 {
		adm := kadm.NewClient(cl)
		d, err := adm.DescribeGroups(ctx, group)
		if err != nil || d[group].State != "Stable" || len(d[group].Members) != 1 {
			t.Fatalf("describe %s: %+v %v", group, d[group], err)
		}
		return d[group].Members[0].MemberID, -1
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	// The member reconciles on its heartbeats: wait for Stable.
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("consumer group describe: %v", err)
		}
		g := resp.Groups[0]
		if g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == 1 {
			return g.Members[0].MemberID, g.Members[0].MemberEpoch
		}
		if ctx.Err() != nil {
			t.Fatalf("consumer group %s not stable: %+v", group, g)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
