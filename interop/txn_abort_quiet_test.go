package interop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestTxnAbortCleanupQuietPartition: an aborted transaction, the same
// producer's next transaction committed, keyed records after them, and
// then nothing more is written. The cleaner's passes run on without new
// appends: they remove the aborted records, forget the transaction and
// drop its ABORT marker. A read_committed fetch must then be handed no
// aborted transaction and a read_committed consumer must get the committed
// transaction. (On a single node the passes were applied where nothing
// published the partition's view: fetches kept the forgotten entry after
// its marker went, and consumers skipped the committed transaction. The
// fetch's check of listed markers against its read covers that too: the
// test fails only with both the publish and the check taken out.)
func TestTxnAbortCleanupQuietPartition(t *testing.T) {
	const topic, txnID = "txn-abort-quiet", "txn-abort-quiet"
	b := brokertest.Start(t, "--retention-check-interval", "100ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	cfg := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "delete.retention.ms": "100",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"} {
		cfg[k] = &v
	}
	created, err := adm.CreateTopic(ctx, 1, 1, cfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	pr := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txnID))
	txn := func(commit bool, recs ...*kgo.Record) {
		t.Helper()
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := pr.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	txn(false, &kgo.Record{Key: []byte("a"), Value: []byte("aborted-1")}, &kgo.Record{Key: []byte("b"), Value: []byte("aborted-2")})
	txn(true, &kgo.Record{Key: []byte("c"), Value: []byte("committed-txn")})
	plain := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	rc := newClient(t, kgo.SeedBrokers(b.Addr))
	// Keyed records past a segment (segment.bytes is at its 1 MiB
	// floor), so the markers lie in a sealed segment the cleaner may
	// rewrite.
	pad := strings.Repeat("x", 100<<10)
	var recs []*kgo.Record
	for i := range 24 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%4), Value: fmt.Appendf(nil, "plain-%d-%s", i, pad)})
	}
	if err := plain.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	last := scanPartition(ctx, t, rc, topic, created.ID, false)
	testwait.For(t, "the ABORT marker dropped with no more appends", 60*time.Second, func() bool {
		last = scanPartition(ctx, t, rc, topic, created.ID, false)
		return last.abortMark == 0 && last.abortRecs == 0
	})
	if s := scanPartition(ctx, t, rc, topic, created.ID, true); s.aborted != 0 {
		t.Fatalf("the ABORT marker is gone, yet read_committed fetches are handed %d aborted transactions", s.aborted)
	}
	c := newClient(t, kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := map[string]string{}
	var next int64
	for next < last.hw-1 {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		fs := c.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("consumed to %d of %d: %v", next, last.hw, got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if strings.HasPrefix(string(r.Value), "aborted") {
				t.Fatalf("aborted record %s=%s at %d", r.Key, r.Value, r.Offset)
			}
			if !strings.HasPrefix(string(r.Value), "plain") {
				got[string(r.Key)] = string(r.Value)
			}
			next = r.Offset + 1
		})
	}
	if got["c"] != "committed-txn" {
		t.Fatalf("read_committed consumer misses the committed transaction after the aborted one's cleanup: %v", got)
	}
}
