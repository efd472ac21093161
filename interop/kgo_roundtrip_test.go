package interop_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestKgoMillionRecordsSurviveKill9 produces one million records over 12
// partitions with each of the four codecs, reads every one back in order,
// kills the broker with SIGKILL, restarts it and reads them all again.
func TestKgoMillionRecordsSurviveKill9(t *testing.T) {
	const (
		partitions = 12
		perCodec   = 250_000
	)
	if testing.Short() {
		t.Skip("one million records: not in -short")
	}
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	topic := "million"
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}

	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for ci, c := range codecs {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(b.Addr),
			kgo.ProducerBatchCompression(c.codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(5*time.Millisecond),
		)
		if err != nil {
			t.Fatal(err)
		}
		var failed atomic.Int64
		var firstErr atomic.Value
		for i := 0; i < perCodec; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: recordValue(ci, i)}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					if failed.Add(1) == 1 {
						firstErr.Store(err)
					}
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("%s flush: %v", c.name, err)
		}
		cl.Close()
		if n := failed.Load(); n > 0 {
			t.Fatalf("%s: %d produces failed, first: %v", c.name, n, firstErr.Load())
		}
	}

	verify := func(phase string) {
		t.Helper()
		got := consumeAll(t, ctx, b.Addr, topic, partitions, len(codecs)*perCodec)
		// Per partition, each codec's sequence must be 0, 12, 24, ... for
		// partition 0, 1, 13, 25, ... for partition 1, and so on.
		for p := 0; p < partitions; p++ {
			next := make([]int, len(codecs))
			for ci := range next {
				next[ci] = p
			}
			for _, v := range got[p] {
				ci, seq := decodeValue(v)
				if ci >= len(codecs) || seq != next[ci] {
					t.Fatalf("%s: partition %d codec %d: got seq %d, want %d", phase, p, ci, seq, next[ci])
				}
				next[ci] += partitions
			}
			for ci, n := range next {
				want := p + partitions*((perCodec-p+partitions-1)/partitions)
				if n != want {
					t.Fatalf("%s: partition %d codec %s ended at %d, want %d", phase, p, codecs[ci].name, n, want)
				}
			}
		}
		t.Logf("%s: all %d records back in order", phase, len(codecs)*perCodec)
	}
	verify("before kill -9")
	b.Kill()
	b.Restart()
	verify("after kill -9")
}

func recordValue(codec, seq int) []byte {
	v := make([]byte, 100)
	binary.BigEndian.PutUint32(v[0:], uint32(codec))
	binary.BigEndian.PutUint64(v[4:], uint64(seq))
	copy(v[12:], fmt.Sprintf("payload-%d-%d", codec, seq))
	return v
}

func decodeValue(v []byte) (codec, seq int) {
	return int(binary.BigEndian.Uint32(v[0:])), int(binary.BigEndian.Uint64(v[4:]))
}

func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// consumeAll reads want records from every partition's start, returning
// the values per partition in offset order.
func consumeAll(t *testing.T, ctx context.Context, addr, topic string, partitions, want int) [][][]byte {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := 0; p < partitions; p++ {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := make([][][]byte, partitions)
	lastOffset := make([]int64, partitions)
	for i := range lastOffset {
		lastOffset[i] = -1
	}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", n, want)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= lastOffset[r.Partition] {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, lastOffset[r.Partition])
			}
			lastOffset[r.Partition] = r.Offset
			out[r.Partition] = append(out[r.Partition], r.Value)
			n++
		})
	}
	if n != want {
		t.Fatalf("consumed %d records, want %d", n, want)
	}
	return out
}
