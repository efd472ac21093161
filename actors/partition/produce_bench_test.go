package partition

import (
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// BenchmarkProduceLocal measures single-node produce through the partition
// actor and the local replicator: "serial" waits for each reply before the
// next produce (the replicator's answer path is on the critical path),
// "window64" keeps 64 produces in flight (throughput). Each produce is one
// batch of 10 records of 1 KiB. cpu-ns/op is the process's user+system CPU
// time per produce, a steadier figure than ns/op on a shared machine.
func BenchmarkProduceLocal(b *testing.B) {
	for _, window := range []int{1, 64} {
		name := "serial"
		if window > 1 {
			name = "window64"
		}
		b.Run(name, func(b *testing.B) { benchProduce(b, window) })
	}
}

func benchProduce(b *testing.B, window int) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	cfg, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := Open(sys.Root, Options{Dir: b.TempDir(), Topic: "bench", Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Close(false) }()
	recs := make([]recordbatch.Record, 10)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: make([]byte, 1024), KeyNull: true}
	}
	now := time.Now().UnixMilli()
	batch, err := recordbatch.Build(recordbatch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: now, MaxTimestamp: now}, recs)
	if err != nil {
		b.Fatal(err)
	}
	replies := make(chan ProduceResult, window)
	reply := func(r ProduceResult) { replies <- r }
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	inflight := 0
	for i := 0; i < b.N; i++ {
		if inflight == window {
			if r := <-replies; r.Err != nil {
				b.Fatal(r.Err)
			}
			inflight--
		}
		// The log keeps its own copy: the same bytes may be resent.
		p.Produce(batch, -1, reply)
		inflight++
	}
	for ; inflight > 0; inflight-- {
		if r := <-replies; r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countLog is a Log that keeps nothing: it only assigns offsets, so that
// BenchmarkStateProduce measures the state machine and its shell alone.
type countLog struct{ next int64 }

// AppendAt patches b's own header, as AppendPatchedAt patches head.
func (c *countLog) AppendAt(b []byte, nowMs int64) (int64, int64, error) {
	if len(b) < recordbatch.HeaderSize {
		return -1, -1, recordbatch.ErrTruncated
	}
	return c.AppendPatchedAt(b[:recordbatch.HeaderSize], b, nowMs)
}

func (c *countLog) AppendPatchedAt(head, b []byte, _ int64) (int64, int64, error) {
	h, err := recordbatch.ParseHeader(head)
	if err != nil {
		return -1, -1, err
	}
	base := c.next
	recordbatch.SetBaseOffset(head, base)
	c.next = base + int64(h.LastOffsetDelta) + 1
	return base, c.next - 1, nil
}
func (c *countLog) DeleteRecordsBefore(int64) error       { return nil }
func (c *countLog) Read(int64, int, bool) ([]byte, error) { return nil, nil }
func (c *countLog) StartOffset() int64                    { return 0 }
func (c *countLog) NextOffset() int64                     { return c.next }

// BenchmarkStateProduce is one produce (a batch of 10 records of 1 KiB)
// through the pure state and its shell, without the actor and the log's
// IO: validation (CRC included), decision, effect and confirmation.
func BenchmarkStateProduce(b *testing.B) {
	cfg, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		b.Fatal(err)
	}
	sl, err := openStateLog(&countLog{}, cfg, 0, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]recordbatch.Record, 10)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: make([]byte, 1024), KeyNull: true}
	}
	now := time.Now().UnixMilli()
	batch, err := recordbatch.Build(recordbatch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: now, MaxTimestamp: now}, recs)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if res := sl.produce(batch, now); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

// idempotentBatch makes a batch of 10 records of 1 KiB of producer 7,
// and a function that gives it the next sequence (and its CRC), as an
// idempotent producer's successive batches.
func idempotentBatch(b *testing.B) ([]byte, func()) {
	recs := make([]recordbatch.Record, 10)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: make([]byte, 1024), KeyNull: true}
	}
	now := time.Now().UnixMilli()
	batch, err := recordbatch.Build(recordbatch.Header{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, FirstTimestamp: now, MaxTimestamp: now}, recs)
	if err != nil {
		b.Fatal(err)
	}
	seq := int32(0)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	next := func() {
		seq += int32(len(recs))
		binary.BigEndian.PutUint32(batch[53:], uint32(seq))
		binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], castagnoli))
	}
	return batch, next
}

// BenchmarkStateProduceIdempotent is BenchmarkStateProduce for an
// idempotent producer (acks=all's usual client): sequence checks and
// producer state included. Each produce also re-sequences the batch and
// recomputes its CRC (the benchmark's own cost, ~10 KiB of CRC-32C).
func BenchmarkStateProduceIdempotent(b *testing.B) {
	cfg, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		b.Fatal(err)
	}
	sl, err := openStateLog(&countLog{}, cfg, 0, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	batch, next := idempotentBatch(b)
	now := time.Now().UnixMilli()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if res := sl.produce(batch, now); res.Err != nil {
			b.Fatal(res.Err)
		}
		next()
	}
}

// BenchmarkProduceLocalIdempotent is BenchmarkProduceLocal's window64 for
// an idempotent producer, through the actor and the local replicator.
func BenchmarkProduceLocalIdempotent(b *testing.B) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	cfg, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := Open(sys.Root, Options{Dir: b.TempDir(), Topic: "bench", Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Close(false) }()
	batch, next := idempotentBatch(b)
	const window = 64
	// The actor patches the records in place until it answers: each
	// produce in flight has its own copy (produce i reuses i-2*window's,
	// answered by then).
	ring := make([][]byte, 2*window)
	for i := range ring {
		ring[i] = make([]byte, len(batch))
	}
	replies := make(chan ProduceResult, window)
	reply := func(r ProduceResult) { replies <- r }
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	inflight := 0
	for i := 0; i < b.N; i++ {
		if inflight == window {
			if r := <-replies; r.Err != nil {
				b.Fatal(r.Err)
			}
			inflight--
		}
		buf := ring[i%len(ring)]
		copy(buf, batch)
		p.Produce(buf, -1, reply)
		next()
		inflight++
	}
	for ; inflight > 0; inflight-- {
		if r := <-replies; r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
