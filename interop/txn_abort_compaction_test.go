package interop_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// partitionScan is what raw fetches of a whole partition saw.
type partitionScan struct {
	bytes     int   // batch bytes from the log start to the high watermark
	aborted   int   // aborted transactions read_committed fetches handed out
	abortMark int   // ABORT markers
	abortRecs int   // records whose value says they were aborted
	hw        int64 // high watermark
}

// scanPartition fetches partition 0 of topic from its log start to its
// high watermark with raw Fetch v12 requests at the isolation level given.
func scanPartition(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, id [16]byte, readCommitted bool) partitionScan {
	t.Helper()
	var s partitionScan
	off := int64(0)
	for range 1000 {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 8<<20
		if readCommitted {
			req.IsolationLevel = 1
		}
		rt := kmsg.NewFetchRequestTopic()
		// kgo sends the newest version both sides serve (v13+ names
		// topics by id).
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, off, 8<<20, -1, -1
		rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
		req.Topics = []kmsg.FetchRequestTopic{rt}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetch at %d: %v", off, err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode == kerr.OffsetOutOfRange.Code && off < p.LogStartOffset {
			off = p.LogStartOffset // the start moved under the scan
			continue
		}
		if p.ErrorCode != 0 {
			t.Fatalf("fetch at %d: error %d", off, p.ErrorCode)
		}
		if off == 0 {
			off = max(off, p.LogStartOffset)
		}
		s.hw = p.HighWatermark
		s.aborted += len(p.AbortedTransactions)
		end := p.HighWatermark
		if readCommitted {
			end = p.LastStableOffset
		}
		batches, err := recordbatch.Split(p.RecordBatches)
		if err != nil {
			t.Fatalf("fetch at %d: %v", off, err)
		}
		for _, b := range batches {
			h, err := recordbatch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			s.bytes += len(b)
			off = h.LastOffset() + 1
			recs, err := recordbatch.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.IsControl() {
				if len(recs) == 1 && len(recs[0].Key) >= 4 && binary.BigEndian.Uint16(recs[0].Key[2:]) == 0 {
					s.abortMark++
				}
				continue
			}
			for _, r := range recs {
				if strings.HasPrefix(string(r.Value), "aborted") {
					s.abortRecs++
				}
			}
		}
		if off >= end || len(batches) == 0 {
			return s
		}
	}
	t.Fatal("partition scan did not reach the high watermark in 1000 fetches")
	return s
}

// TestTxnAbortCompaction: a transactional producer writes 600 transactions
// of ten 100-byte records over 20 keys on a compacted topic (segment.ms
// 100, delete.retention.ms 300), aborting four of every five, then keeps
// committing one small transaction every 20 ms. The cleaner removes the
// aborted records, then the ABORT markers and the partition's aborted
// list entries (in that order): within 60 s the log holds no aborted
// record and no ABORT marker, a read_committed fetch of the whole log is
// handed no aborted transaction, and the log is a small fraction of what
// was written; read_committed and read_uncommitted consumers then read
// exactly the committed latest value of every key and nothing aborted.
func TestTxnAbortCompaction(t *testing.T) {
	const (
		txns   = 600
		keys   = 20
		bound  = 64 << 10
		topic  = "txn-abort-compaction"
		txnID  = "txn-abort-compaction"
		perTxn = 10
	)
	b := brokertest.Start(t, "--retention-check-interval", "100ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	cfg := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.ms": "100", "delete.retention.ms": "300",
		"min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"} {
		cfg[k] = &v
	}
	created, err := adm.CreateTopic(ctx, 1, 1, cfg, topic)
	if err != nil {
		t.Fatal(err)
	}
	pr := newClient(t, kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(txnID))
	want := map[string]string{}
	payload := 0 // key and value bytes produced
	pad := strings.Repeat("x", 100)
	txn := func(i int, commit bool, recs ...*kgo.Record) {
		t.Helper()
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			payload += len(r.Key) + len(r.Value)
		}
		if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := pr.EndTransaction(ctx, end); err != nil {
			t.Fatalf("transaction %d: end: %v", i, err)
		}
		if commit {
			for _, r := range recs {
				want[string(r.Key)] = string(r.Value)
			}
		}
	}
	began := time.Now()
	for i := range txns {
		commit := i%5 == 4
		var recs []*kgo.Record
		for j := range perTxn {
			v := "committed-"
			if !commit {
				v = "aborted-"
			}
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%02d", (i*perTxn+j)%keys), Value: fmt.Appendf(nil, "%s%d-%s", v, i, pad)})
		}
		txn(i, commit, recs...)
	}
	rc := newClient(t, kgo.SeedBrokers(b.Addr))
	written, writtenRC := scanPartition(ctx, t, rc, topic, created.ID, false), scanPartition(ctx, t, rc, topic, created.ID, true)
	t.Logf("written in %v: %d bytes of keys and values; then the log held %d bytes, %d ABORT markers, %d aborted records, "+
		"read_committed was handed %d aborted transactions; high watermark %d", time.Since(began).Round(100*time.Millisecond),
		payload, written.bytes, written.abortMark, written.abortRecs, writtenRC.aborted, written.hw)

	// Ticks: committed transactions keep segments rolling and the last
	// stable offset moving, as a live application's would.
	tick := 0
	start := time.Now()
	var last, lastRC partitionScan
	testwait.For(t, "aborted records, ABORT markers and aborted entries gone", 60*time.Second, func() bool {
		for range 5 {
			txn(txns+tick, true, &kgo.Record{Key: []byte("tick"), Value: fmt.Appendf(nil, "committed-tick-%d", tick)})
			tick++
		}
		last = scanPartition(ctx, t, rc, topic, created.ID, false)
		lastRC = scanPartition(ctx, t, rc, topic, created.ID, true)
		return last.abortRecs == 0 && last.abortMark == 0 && lastRC.aborted == 0 && last.bytes <= bound
	})
	t.Logf("after %v (%d tick transactions): %d bytes, %d ABORT markers, %d aborted records, read_committed handed %d aborted transactions",
		time.Since(start).Round(100*time.Millisecond), tick, last.bytes, last.abortMark, last.abortRecs, lastRC.aborted)
	if payload < 4*bound {
		t.Fatalf("too little written (%d bytes) to show compaction against %d", payload, bound)
	}

	for name, level := range map[string]kgo.IsolationLevel{"read_committed": kgo.ReadCommitted(), "read_uncommitted": kgo.ReadUncommitted()} {
		c := newClient(t, kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(level))
		got := map[string]string{}
		var next int64
		// The last tick is the last record written.
		for got["tick"] != want["tick"] {
			fs := c.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("%s: poll: %v", name, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if strings.HasPrefix(string(r.Value), "aborted") {
					t.Fatalf("%s: aborted record %s=%.20s at %d", name, r.Key, r.Value, r.Offset)
				}
				got[string(r.Key)] = string(r.Value)
				next = r.Offset + 1
			})
			if ctx.Err() != nil {
				t.Fatalf("%s: consumed to %d of %d", name, next, last.hw)
			}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: %d keys read, want %d; the latest values differ", name, len(got), len(want))
		}
		c.Close()
	}
}
