package partition

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// BenchmarkProduceFsyncAlways is the release bench's "fsync every write"
// phase in miniature (issue 13): acks=all produces of one 64 KiB batch
// (64 records of 1 KiB) to 3 SyncAlways partitions on a real disk, each
// partition with 5 produces in flight, as a producer with
// max.in.flight.requests.per.connection=5 and batch.size=65536 keeps them.
// One op is one produce; MB/s is the figure. Count the fsyncs with
// strace -f -c -e trace=fsync,fdatasync on the test binary. It uses only
// the package's public API, so the same file runs against older trees.
//
// REGENT_BENCH_DIR puts the logs on that directory's disk (default: the
// test's temporary directory).
func BenchmarkProduceFsyncAlways(b *testing.B) {
	const partitions, window, records = 3, 5, 64
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer sys.Shutdown()
	cfg, err := logconfig.Resolve(nil, logconfig.Broker{})
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	if d := os.Getenv("REGENT_BENCH_DIR"); d != "" {
		if root, err = os.MkdirTemp(d, "fsync-bench"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(root)
	}
	ps := make([]*Partition, partitions)
	for i := range ps {
		ps[i], err = Open(sys.Root, Options{Dir: fmt.Sprintf("%s/t-%d", root, i), Topic: "t", Index: int32(i), Config: cfg,
			Sync: SyncAlways, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = ps[i].Close(false) }()
	}
	recs := make([]recordbatch.Record, records)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Value: make([]byte, 1024), KeyNull: true}
	}
	now := time.Now().UnixMilli()
	batch, err := recordbatch.Build(recordbatch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: now, MaxTimestamp: now}, recs)
	if err != nil {
		b.Fatal(err)
	}
	type reply struct {
		p   int
		err error
	}
	replies := make(chan reply, partitions*window)
	send := func(i int) {
		// Each produce gets its own copy: the actor patches it in place.
		ps[i].Produce(append([]byte(nil), batch...), -1, func(r ProduceResult) {
			var err error
			if r.Err != nil {
				err = r.Err
			}
			replies <- reply{i, err}
		})
	}
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	sent, done := 0, 0
	for i := range partitions {
		for range window {
			if sent < b.N {
				send(i)
				sent++
			}
		}
	}
	for done < b.N {
		select {
		case r := <-replies:
			if r.err != nil {
				b.Fatalf("produce to partition %d: %v", r.p, r.err)
			}
			done++
			if sent < b.N {
				send(r.p)
				sent++
			}
		case <-time.After(30 * time.Second):
			b.Fatalf("no reply within 30s (%d of %d answered)", done, b.N)
		}
	}
	b.StopTimer()
}
