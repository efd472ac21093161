package share

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// TestRealPartitionReadCommitted runs the Manager on a real partition
// (FromPartition: the plain Fetch's read path and read view): records of
// an aborted transaction and the markers are archived, never handed out;
// an open transaction stops read_committed at the last stable offset.
func TestRealPartitionReadCommitted(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	cfg, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := partition.Open(sys.Root, partition.Options{Dir: t.TempDir(), Topic: "t", Config: cfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(false)

	produce := func(pid int64, seq int32, n int, txn bool) {
		t.Helper()
		recs := make([]recordbatch.Record, n)
		for i := range recs {
			recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: []byte("v")}
		}
		h := recordbatch.Header{ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq, FirstTimestamp: time.Now().UnixMilli()}
		if pid < 0 {
			h.ProducerEpoch, h.BaseSequence = -1, -1
		}
		if txn {
			h.Attributes |= recordbatch.AttrTransactional
		}
		b, err := recordbatch.Build(h, recs)
		if err != nil {
			t.Fatal(err)
		}
		res := wait(t, func(r func(partition.ProduceResult)) { p.Produce(b, -1, r) })
		if res.Err != nil {
			t.Fatalf("produce: %v %s", res.Err, res.ErrMessage)
		}
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		if err := wait(t, func(r func(error)) { p.WriteTxnMarker(pid, 0, commit, 0, r) }); err != nil {
			t.Fatal(err)
		}
	}
	produce(7, 0, 3, true) // 0-2, aborted at 3
	marker(7, false)
	produce(-1, 0, 2, false) // 4-5
	produce(8, 0, 2, true)   // 6-7, committed at 8
	marker(8, true)
	produce(9, 0, 2, true) // 9-10, open

	m, err := NewManager(Options{DataDir: t.TempDir(), Root: sys.Root, Logger: quiet,
		Logs: func(string, int32) (Log, bool) { return FromPartition(p), true },
		Config: func(string) Config {
			return Config{AutoOffsetReset: "earliest", ReadCommitted: true}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := wait(t, func(f func(AcquireResult)) { m.Acquire(AcquireRequest{Key: key, Member: "a", MaxRecords: 100}, f) })
	if r.ErrorCode != 0 || !slices.Equal(r.Acquired, []AcquiredRange{{4, 7, 1}}) {
		t.Fatalf("read_committed: %+v", r)
	}
	got := parseBatches(r.Records)
	if len(got) != 2 || got[0].Base != 4 || got[1].Base != 6 || r.HighWatermark != 11 {
		t.Fatalf("records: %+v hwm %d", got, r.HighWatermark)
	}
	if s := m.inspect(key).String(); s != "spso=4 end=9 [4-7 acquired n=1 a@"+s[len("spso=4 end=9 [4-7 acquired n=1 a@"):] {
		t.Fatalf("state: %s", s)
	}
	// The open transaction commits: its records come.
	marker(9, true)
	r = wait(t, func(f func(AcquireResult)) { m.Acquire(AcquireRequest{Key: key, Member: "b", MaxRecords: 100}, f) })
	if !slices.Equal(r.Acquired, []AcquiredRange{{9, 10, 1}}) {
		t.Fatalf("after commit: %+v", r)
	}
}
