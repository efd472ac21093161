package share

import (
	"testing"
)

// BenchmarkStateAcquireAck: one acquisition of a 10-record batch and its
// ACCEPT, in the pure state machine.
func BenchmarkStateAcquireAck(b *testing.B) {
	lim := Config{}.limits()
	s := &State{}
	s.Init([16]byte{}, 0)
	b.ReportAllocs()
	for i := range b.N {
		base := int64(i) * 10
		rs, _ := s.Acquire(AcquireInput{Member: "m", NowMs: int64(i), MaxRecords: 10, Limit: base + 10,
			Batches: []Batch{{Base: base, Last: base + 9}}}, lim)
		if len(rs) != 1 || s.Acknowledge("m", int64(i), []AckBatch{{base, base + 9, []AckType{AckAccept}}}, lim) != 0 {
			b.Fatal("acquire/ack failed")
		}
	}
}

// BenchmarkManagerAcquireAck: the same through the Manager (actor, log
// read, two durable writes to the share log without fsync).
func BenchmarkManagerAcquireAck(b *testing.B) {
	h := newHarnessWith(b, Config{AutoOffsetReset: "earliest"}, nil)
	for range b.N {
		h.log.append(10, false, false, -1)
	}
	b.ResetTimer()
	for i := range b.N {
		ch := make(chan AcquireResult, 1)
		h.m.Acquire(AcquireRequest{Key: key, Member: "m", MaxRecords: 10, MaxBytes: 4096}, func(r AcquireResult) { ch <- r })
		r := <-ch
		if len(r.Acquired) != 1 {
			b.Fatalf("acquire %d: %+v", i, r)
		}
		done := make(chan int16, 1)
		h.m.Acknowledge(key, "m", []AckBatch{{r.Acquired[0].First, r.Acquired[0].Last, []AckType{AckAccept}}}, func(c int16) { done <- c })
		if c := <-done; c != 0 {
			b.Fatalf("ack: %d", c)
		}
	}
}
