package interop_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterLeaderEpochs: a partition's leader epoch is the raft term.
// Metadata reports it, records are stamped with the term they were
// written in, and after the leader is killed the epoch rises: a fetch or
// ListOffsets at the old epoch is fenced and names the new leader, one
// ahead is unknown, OffsetForLeaderEpoch answers each term's end, and a
// consumer that read across the change validates its position and goes
// on without a reset, a gap or a duplicate. The restarted node holds the
// same batches, epochs included.
func TestClusterLeaderEpochs(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	const topic = "leader-epochs"
	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(c.Seeds()...)))
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	first := c.LeaderID(t)
	term := func(id int32) int32 {
		t.Helper()
		st, err := c.Status(id)
		if err != nil {
			t.Fatal(err)
		}
		return int32(st.Term)
	}
	epoch1 := term(first)
	// metadataEpoch is what node id's Metadata says of the partition.
	metadataEpoch := func(id int32) (leader, epoch int32, ok bool) {
		cl := newClient(t, kgo.SeedBrokers(c.Node(id).Addr))
		defer cl.Close()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, 0, false
		}
		p := resp.Topics[0].Partitions[0]
		return p.Leader, p.LeaderEpoch, p.ErrorCode == 0
	}
	for _, id := range c.IDs() {
		testwait.For(t, fmt.Sprintf("node %d reports epoch %d", id, epoch1), time.Minute, func() bool {
			l, e, ok := metadataEpoch(id)
			return ok && l == first && e == epoch1
		})
	}

	produce := func(cl *kgo.Client, prefix string) {
		t.Helper()
		for i := range 10 {
			r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", prefix, i, err)
			}
		}
	}
	producer := newClusterClient(t, c, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(100))
	defer producer.Close()
	produce(producer, "before")

	// A consumer reads the first term's records, then goes on across the
	// leader change.
	consumer := newClusterClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer consumer.Close()
	var got []*kgo.Record
	consume := func(n int) {
		t.Helper()
		for len(got) < n {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d records of %d: %v", len(got), n, ctx.Err())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
			got = append(got, fs.Records()...)
		}
	}
	consume(10)
	for _, r := range got {
		if r.LeaderEpoch != epoch1 {
			t.Fatalf("record at %d has leader epoch %d, want the term %d", r.Offset, r.LeaderEpoch, epoch1)
		}
	}

	c.Kill(first)
	second := c.WaitLeader(t, time.Minute)
	epoch2 := term(second)
	if epoch2 <= epoch1 {
		t.Fatalf("new leader's term %d, not above %d", epoch2, epoch1)
	}
	for _, id := range c.LiveIDs() {
		testwait.For(t, fmt.Sprintf("node %d reports epoch %d", id, epoch2), time.Minute, func() bool {
			l, e, ok := metadataEpoch(id)
			return ok && l == second && e == epoch2
		})
	}

	lc := newClient(t, kgo.SeedBrokers(c.Node(second).Addr))
	defer lc.Close()
	broker := lc.Broker(int(second))
	var topicID [16]byte
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID = md.Topics[topic].ID
	fetchAt := func(current int32) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := fetchAt(epoch1); p.ErrorCode != kerr.FencedLeaderEpoch.Code || p.CurrentLeader.LeaderID != second || p.CurrentLeader.LeaderEpoch != epoch2 {
		t.Fatalf("fetch at the old epoch: error %d, current leader %+v; want FENCED_LEADER_EPOCH naming node %d at %d", p.ErrorCode, p.CurrentLeader, second, epoch2)
	}
	if p := fetchAt(epoch2 + 1); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("fetch at a future epoch: error %d, want UNKNOWN_LEADER_EPOCH", p.ErrorCode)
	}
	if p := fetchAt(epoch2); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch at the current epoch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	listAt := func(current int32) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := listAt(epoch1); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("list offsets at the old epoch: error %d, want FENCED_LEADER_EPOCH", p.ErrorCode)
	}
	if p := listAt(epoch2); p.ErrorCode != 0 || p.Offset != 10 || p.LeaderEpoch != epoch1 {
		t.Fatalf("latest offset: %+v, want 10 in epoch %d (nothing written in %d yet)", p, epoch1, epoch2)
	}
	endFor := func(epoch int32) (int32, int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, epoch2, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, broker)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("offset for leader epoch %d: error %d", epoch, p.ErrorCode)
		}
		return p.LeaderEpoch, p.EndOffset
	}
	if e, end := endFor(epoch1); e != epoch1 || end != 10 {
		t.Fatalf("end of epoch %d: (%d, %d), want (%d, 10)", epoch1, e, end, epoch1)
	}
	if e, end := endFor(epoch2); e != epoch2 || end != 10 {
		t.Fatalf("end of the current epoch %d before a write: (%d, %d), want (%d, 10)", epoch2, e, end, epoch2)
	}

	produce(producer, "after")
	if e, end := endFor(epoch1); e != epoch1 || end != 10 {
		t.Fatalf("end of epoch %d after the new term's writes: (%d, %d), want (%d, 10)", epoch1, e, end, epoch1)
	}
	if e, end := endFor(epoch2); e != epoch2 || end != 20 {
		t.Fatalf("end of epoch %d: (%d, %d), want (%d, 20)", epoch2, e, end, epoch2)
	}
	consume(20)
	if len(got) != 20 {
		t.Fatalf("consumed %d records, want 20", len(got))
	}
	for i, r := range got {
		want, epoch := fmt.Sprintf("before-%d", i), epoch1
		if i >= 10 {
			want, epoch = fmt.Sprintf("after-%d", i-10), epoch2
		}
		if r.Offset != int64(i) || string(r.Value) != want || r.LeaderEpoch != epoch {
			t.Fatalf("record %d: offset %d %q epoch %d, want %q in epoch %d", i, r.Offset, r.Value, r.LeaderEpoch, want, epoch)
		}
	}

	// The killed node catches up to the same batches, stamps included.
	c.Restart(first)
	c.WaitCaughtUp(t, first, 2*time.Minute)
	settled(t, c)
	for _, id := range c.IDs() {
		c.Kill(id)
	}
	ids := c.IDs()
	want := readPartitionDir(t, filepath.Join(c.Node(ids[0]).Dir, "state", topic+"-0"))
	for _, id := range ids[1:] {
		other := readPartitionDir(t, filepath.Join(c.Node(id).Dir, "state", topic+"-0"))
		if !maps.EqualFunc(want, other, bytes.Equal) {
			t.Fatalf("node %d's partition differs from node %d's", id, ids[0])
		}
	}
}
