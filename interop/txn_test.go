package interop_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestTxnCommitAbortReadCommitted: a kgo transactional producer commits
// and aborts in turn; a read_committed consumer sees exactly the committed
// records, once each, and a read_uncommitted one sees everything.
func TestTxnCommitAbortReadCommitted(t *testing.T) {
	const (
		topic      = "txn-commit-abort"
		partitions = 3
		perTxn     = 60
		rounds     = 6
	)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := newAdmin(t, b.Addr).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("tx-commit-abort"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]bool{}
	for round := range rounds {
		commit := round%2 == 0
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range perTxn {
			v := fmt.Sprintf("round-%d-commit=%v-%d", round, commit, i)
			recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Value: []byte(v)})
			if commit {
				want[v] = true
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("round %d produce: %v", round, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("round %d end (commit=%v): %v", round, commit, err)
		}
	}
	got := consumeIsolated(t, ctx, b.Addr, topic, partitions, true, len(want))
	for v, n := range got {
		if !want[v] || n != 1 {
			t.Fatalf("read_committed saw %q %d times (committed: %v)", v, n, want[v])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read_committed saw %d distinct records, want %d", len(got), len(want))
	}
	all := consumeIsolated(t, ctx, b.Addr, topic, partitions, false, rounds*perTxn)
	if len(all) != rounds*perTxn {
		t.Fatalf("read_uncommitted saw %d records, want %d", len(all), rounds*perTxn)
	}
}

// TestTxnResumeAfterRestart is Flink's KafkaSink recovery: a transaction
// opened with raw requests (InitProducerId, AddPartitionsToTxn, produce) is
// left open, the connection dropped and the broker killed and restarted;
// a new client then commits it with the old producer id and epoch
// (EndTxn), and read_committed sees its records exactly once.
func TestTxnResumeAfterRestart(t *testing.T) {
	const (
		topic = "txn-resume"
		perP  = 50
	)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := newAdmin(t, b.Addr).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	raw := rawClient(t, b.Addr)
	pid, epoch := initTxnProducer(t, ctx, raw, "flink-sink-0", 600_000)
	addPartitions(t, ctx, raw, "flink-sink-0", pid, epoch, topic, 0, 1)
	var want []string
	for p := range int32(2) {
		var vals []string
		for i := range perP {
			vals = append(vals, fmt.Sprintf("resume-p%d-%d", p, i))
		}
		produceTxnBatch(t, ctx, raw, "flink-sink-0", topic, p, pid, epoch, 0, vals)
		want = append(want, vals...)
	}
	raw.Close()
	if n := len(consumeIsolated(t, ctx, b.Addr, topic, 2, false, 2*perP)); n != 2*perP {
		t.Fatalf("uncommitted records before the restart: %d", n)
	}

	b.Kill()
	b.Restart()

	fresh := rawClient(t, b.Addr)
	st := describeTxn(t, ctx, fresh, "flink-sink-0")
	if st.State != "Ongoing" || st.ProducerID != pid || st.ProducerEpoch != epoch {
		t.Fatalf("after restart: %+v", st)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "flink-sink-0", pid, epoch, true
	resp, err := end.RequestWith(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("EndTxn(commit) from a new client: %v", err)
	}
	got := consumeIsolated(t, ctx, b.Addr, topic, 2, true, len(want))
	for _, v := range want {
		if got[v] != 1 {
			t.Fatalf("read_committed saw %q %d times", v, got[v])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read_committed saw %d records, want %d", len(got), len(want))
	}
	// A retry of the commit (its answer lost) succeeds too.
	resp, err = end.RequestWith(ctx, fresh)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("EndTxn retry: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestTxnTimeoutAborts: a transaction left open past its timeout is
// aborted (its producer fenced), and read_committed never shows it.
func TestTxnTimeoutAborts(t *testing.T) {
	const topic = "txn-timeout"
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := newAdmin(t, b.Addr).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	raw := rawClient(t, b.Addr)
	pid, epoch := initTxnProducer(t, ctx, raw, "left-open", 2000)
	start := time.Now()
	addPartitions(t, ctx, raw, "left-open", pid, epoch, topic, 0)
	produceTxnBatch(t, ctx, raw, "left-open", topic, 0, pid, epoch, 0, []string{"never-1", "never-2", "never-3"})

	deadline := time.Now().Add(30 * time.Second)
	for {
		st := describeTxn(t, ctx, raw, "left-open")
		if st.State == "CompleteAbort" {
			if st.ProducerEpoch != epoch+1 {
				t.Fatalf("timed-out transaction's epoch %d, want %d (fenced)", st.ProducerEpoch, epoch+1)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction still %s 30s after a 2s timeout", st.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if el := time.Since(start); el < 1500*time.Millisecond {
		t.Fatalf("aborted after %v, before its 2s timeout", el)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "left-open", pid, epoch, true
	resp, err := end.RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("commit after the timeout: %v, want PRODUCER_FENCED", kerr.ErrorForCode(resp.ErrorCode))
	}
	// The abort marker carried the bumped epoch: the zombie cannot write.
	if err := produceTxnBatchErr(ctx, raw, "left-open", topic, 0, pid, epoch, 3, []string{"zombie"}); !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("produce with the fenced epoch: %v, want INVALID_PRODUCER_EPOCH", err)
	}

	// A committed transaction after it: read_committed gets past the
	// aborted records to it, and shows only it.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("after"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got := consumeIsolated(t, ctx, b.Addr, topic, 1, true, 1)
	if len(got) != 1 || got["after"] != 1 {
		t.Fatalf("read_committed saw %v", got)
	}
}

// TestTxnAdminAPIs: ListTransactions, DescribeTransactions and
// DescribeProducers through kadm.
func TestTxnAdminAPIs(t *testing.T) {
	const topic = "txn-admin"
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	raw := rawClient(t, b.Addr)
	pid, epoch := initTxnProducer(t, ctx, raw, "admin-open", 600_000)
	addPartitions(t, ctx, raw, "admin-open", pid, epoch, topic, 0)
	produceTxnBatch(t, ctx, raw, "admin-open", topic, 0, pid, epoch, 0, []string{"a", "b"})
	initTxnProducer(t, ctx, raw, "admin-idle", 60_000)

	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if ids := listed.TransactionalIDs(); len(ids) != 1 || ids[0] != "admin-open" {
		t.Fatalf("ListTransactions(Ongoing): %v", ids)
	}
	all, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || len(all.TransactionalIDs()) != 2 {
		t.Fatalf("ListTransactions: %v %v", all.TransactionalIDs(), err)
	}
	desc, err := adm.DescribeTransactions(ctx, "admin-open", "missing")
	if err != nil {
		t.Fatal(err)
	}
	d := desc["admin-open"]
	if d.Err != nil || d.State != "Ongoing" || d.ProducerID != pid || len(d.Topics[topic]) != 1 {
		t.Fatalf("DescribeTransactions: %+v", d)
	}
	if desc["missing"].Err != kerr.TransactionalIDNotFound {
		t.Fatalf("DescribeTransactions(missing): %v", desc["missing"].Err)
	}
	prods, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	prods.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == pid && p.CurrentTxnStartOffset == 0 {
			found = true
		}
	})
	if !found {
		t.Fatalf("DescribeProducers has no open transaction of producer %d: %+v", pid, prods)
	}
}

// rawClient is a kgo client for raw requests, capped at the pre-KIP-890
// part 2 versions a Java or kgo client uses when the broker does not
// advertise transaction.version 2 (Produce v11, which names topics,
// AddPartitionsToTxn v3, EndTxn v4).
func rawClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func initTxnProducer(t *testing.T, ctx context.Context, cl *kgo.Client, id string, timeoutMs int32) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = &id, timeoutMs
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		if err == kerr.ConcurrentTransactions || err == kerr.CoordinatorLoadInProgress {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("InitProducerId(%s): %v", id, err)
		}
		return resp.ProducerID, resp.ProducerEpoch
	}
}

func addPartitions(t *testing.T, ctx context.Context, cl *kgo.Client, id string, pid int64, epoch int16, topic string, parts ...int32) {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range resp.Topics {
		for _, p := range tr.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("AddPartitionsToTxn %s-%d: %v", tr.Topic, p.Partition, err)
			}
		}
	}
}

func describeTxn(t *testing.T, ctx context.Context, cl *kgo.Client, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransactionStates) != 1 {
		t.Fatalf("DescribeTransactions: %d states", len(resp.TransactionStates))
	}
	st := resp.TransactionStates[0]
	if err := kerr.ErrorForCode(st.ErrorCode); err != nil {
		t.Fatalf("DescribeTransactions(%s): %v", id, err)
	}
	return st
}

// produceTxnBatch produces one transactional batch of vals.
func produceTxnBatch(t *testing.T, ctx context.Context, cl *kgo.Client, id, topic string, partition int32, pid int64, epoch int16, seq int32, vals []string) {
	t.Helper()
	if err := produceTxnBatchErr(ctx, cl, id, topic, partition, pid, epoch, seq, vals); err != nil {
		t.Fatalf("transactional produce to %s-%d: %v", topic, partition, err)
	}
}

func produceTxnBatchErr(ctx context.Context, cl *kgo.Client, id, topic string, partition int32, pid int64, epoch int16, seq int32, vals []string) error {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, txnBatch(pid, epoch, seq, vals)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// txnBatch encodes an uncompressed transactional record batch (magic 2).
func txnBatch(pid int64, epoch int16, seq int32, vals []string) []byte {
	now := time.Now().UnixMilli()
	var recs []byte
	for i, v := range vals {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)[1:] // Length 0 is one varint byte
		recs = kbin.AppendVarint(recs, int32(len(body)))
		recs = append(recs, body...)
	}
	b := kmsg.RecordBatch{
		Magic: 2, Attributes: 0x10, LastOffsetDelta: int32(len(vals) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(len(vals)), Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// consumeIsolated reads a topic from the start at an isolation level until
// want records came (then a little longer, to catch extras) and counts
// each value.
func consumeIsolated(t *testing.T, ctx context.Context, addr, topic string, partitions int, committed bool, want int) map[string]int {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]int{}
	n := 0
	var settle time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records (committed=%v) before the deadline", n, want, committed)
		}
		fs.EachError(func(tp string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s/%d: %v", tp, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			n++
		})
		if n >= want {
			if settle.IsZero() {
				settle = time.Now().Add(time.Second)
			} else if time.Now().After(settle) {
				return got
			}
		}
	}
}
