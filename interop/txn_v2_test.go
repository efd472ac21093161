package interop_test

// Transactions v2 (KIP-890) against Regent: the Java client negotiating
// transaction.version=2 (Kafka 4.3's default for a new cluster, which
// Regent finalizes too), and the produce-side verification that keeps
// hanging transactions from forming.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/regent-broker/regent/interop/brokertest"
)

// tv2LogLine is what the coordinator logs the first time a transactional
// id ends a transaction with EndTxn v5.
const tv2LogLine = "transactional id runs transaction version 2"

// TestTxnV2JavaProducer: Kafka 4.3's Java producer, seeing
// transaction.version=2 finalized, runs ten transactions (records on three
// partitions and a group offset each; every third aborted) with Produce
// v12+ implicit adds, TxnOffsetCommit v5 and EndTxn v5. The broker logs
// the id's EndTxn v5 use, the epoch ends ten bumps up (one per commit or
// abort), a read_committed consumer sees exactly the committed records and
// the group holds the last committed transaction's offset.
func TestTxnV2JavaProducer(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, id, group, n = "txv2", "java-tv2", "txv2-group", 10
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}

	src, _ := filepath.Abs(filepath.Join("javaclients", "TxnProducer.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	out, err := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j, "-cp", filepath.Join(lib, "*"),
		src, b.Addr, topic, id, fmt.Sprint(n), group).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "DONE") {
		t.Fatalf("TxnProducer: %v\n%s", err, out)
	}
	want := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	commits := 0
	for sc.Scan() {
		var i int
		var how string
		if k, _ := fmt.Sscanf(sc.Text(), "T %d %s", &i, &how); k == 2 && how == "commit" {
			commits++
			for j := range 3 {
				want[fmt.Sprintf("t%d-r%d", i, j)] = 1
			}
		}
	}
	if commits != 7 {
		t.Fatalf("TxnProducer committed %d transactions, want 7:\n%s", commits, out)
	}

	if log := b.LogTail(1 << 20); !strings.Contains(log, tv2LogLine) || !strings.Contains(log, id) {
		t.Fatalf("the broker did not log EndTxn v5 use for %s; log tail:\n%s", id, b.LogTail(4000))
	}
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := ds[id]; !ok || d.ProducerEpoch != n || d.State != "CompleteCommit" {
		t.Fatalf("DescribeTransactions(%s) = %+v; want epoch %d (one bump per EndTxn v5) and CompleteCommit", id, ds[id], n)
	}

	got := consumeIsolated(t, ctx, b.Addr, topic, 3, true, len(want))
	if len(got) != len(want) {
		t.Fatalf("read_committed saw %d distinct records, want %d: %v", len(got), len(want), got)
	}
	for v, c := range got {
		if want[v] != c {
			t.Fatalf("read_committed saw %q %d times, want %d (aborted records must not show)", v, c, want[v])
		}
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.At != n {
		t.Fatalf("group %s offset for %s-0 = %+v, want %d (the last committed transaction's)", group, topic, o, n)
	}
	t.Logf("Java producer under transaction.version=2: %d commits, %d aborts, epoch %d, %d committed records read", commits, n-commits, ds[id].ProducerEpoch, len(got))
}

// TestTxnProduceNeedsPartitionInTransaction: a client of transaction
// version 1 (Produce v11) producing to a partition it never added is
// refused with INVALID_TXN_STATE and nothing is appended, so no hanging
// transaction forms (read_committed consumers are not held back); after
// AddPartitionsToTxn the produce is accepted and the commit releases it.
// A Produce v12 adds its partition by itself (KIP-890 part 2).
func TestTxnProduceNeedsPartitionInTransaction(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "verify"
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl := rawClient(t, b.Addr) // Produce v11, EndTxn v4, AddPartitionsToTxn v3
	id := "never-added"
	pid, epoch := initTxnProducer(t, ctx, cl, id, 600_000)
	err := produceTxnBatchErr(ctx, cl, id, topic, 0, pid, epoch, 0, []string{"hanging"})
	if !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("produce to a partition not in the transaction: %v, want INVALID_TXN_STATE", err)
	}
	// Nothing was appended: the log end and the last stable offset agree.
	if lso, hw := listEnd(t, ctx, adm, topic, 0, true), listEnd(t, ctx, adm, topic, 0, false); lso != 0 || hw != 0 {
		t.Fatalf("after the refused produce: last stable %d, high watermark %d; want 0, 0", lso, hw)
	}

	addPartitions(t, ctx, cl, id, pid, epoch, topic, 0)
	produceTxnBatch(t, ctx, cl, id, topic, 0, pid, epoch, 0, []string{"a", "b"})
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	if resp, err := end.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}

	// Produce v12 (no AddPartitionsToTxn) on a transaction of its own.
	id2 := "implicit"
	pid2, epoch2 := initTxnProducer(t, ctx, cl, id2, 600_000)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 12
	req.TransactionID, req.Acks, req.TimeoutMillis = &id2, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 1, txnBatch(pid2, epoch2, 0, []string{"c"})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 12) // v13 names topics by id
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 5)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	resp, err := req.RequestWith(ctx, cl2)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("Produce v12 with an implicit add: %v %v", err, kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	if d := describeTxn(t, ctx, cl, id2); d.State != "Ongoing" || len(d.Topics) != 1 || d.Topics[0].Partitions[0] != 1 {
		t.Fatalf("after Produce v12: %+v, want Ongoing with %s-1", d, topic)
	}
	end = kmsg.NewPtrEndTxnRequest()
	end.Version = 5
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id2, pid2, epoch2, true
	eresp, err := end.RequestWith(ctx, cl2)
	if err != nil || eresp.ErrorCode != 0 || eresp.ProducerEpoch != epoch2+1 {
		t.Fatalf("EndTxn v5: %v %+v, want the epoch bumped to %d", err, eresp, epoch2+1)
	}

	got := consumeIsolated(t, ctx, b.Addr, topic, 2, true, 3)
	if len(got) != 3 || got["a"] != 1 || got["b"] != 1 || got["c"] != 1 || got["hanging"] != 0 {
		t.Fatalf("read_committed saw %v, want a, b and c once", got)
	}
}

// listEnd is a partition's last stable offset (committed) or high
// watermark.
func listEnd(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, p int32, committed bool) int64 {
	t.Helper()
	var lo kadm.ListedOffsets
	var err error
	if committed {
		lo, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		lo, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		t.Fatal(err)
	}
	o, ok := lo.Lookup(topic, p)
	if !ok || o.Err != nil {
		t.Fatalf("list offsets %s-%d: %+v", topic, p, o)
	}
	return o.Offset
}
