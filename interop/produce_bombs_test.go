package interop

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/hostile"
)

// TestProduceGzipBombsBoundedRSS is the case: 8 connections each
// pipelining three ~510 KiB gzip batches that inflate to 512 MiB. Every one
// must be refused with INVALID_RECORD, and the broker's peak RSS must stay
// far from what inflating them would take (it was 2.3 GiB).
func TestProduceGzipBombsBoundedRSS(t *testing.T) {
	const (
		conns    = 8
		perConn  = 3
		inflated = 512 // MiB per bomb
		rssBound = 256 << 20
	)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "bombs"); err != nil {
		t.Fatal(err)
	}
	bomb, err := hostile.Batch(hostile.BatchSpec{Codec: hostile.CodecGzip, Records: inflated, Key: []byte("k"), ValueSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	before, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	outcomes := make([][]hostile.ProduceOutcome, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batches := make([][]byte, perConn)
			for j := range batches {
				batches[j] = bomb
			}
			outcomes[i] = hostile.ProduceRaw(b.Addr, "bombs", batches, 90*time.Second)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	after, err := hostile.ReadMemStatus(b.PID())
	if err != nil {
		t.Fatal(err)
	}
	for i, os := range outcomes {
		for j, o := range os {
			if o.Err != nil || o.Code != kerr.InvalidRecord.Code || !strings.Contains(o.Message, "decompress") {
				t.Errorf("connection %d bomb %d: code %d message %q err %v; want INVALID_RECORD about decompression", i, j, o.Code, o.Message, o.Err)
			}
		}
	}
	t.Logf("%d gzip bombs of %d KiB (%d MiB inflated each) refused in %v; broker RSS %d MiB before, peak %d MiB",
		conns*perConn, len(bomb)>>10, inflated, took.Round(time.Millisecond), before.RSS>>20, after.HWM>>20)
	if after.HWM > rssBound {
		t.Errorf("broker peak RSS %d MiB, bound %d MiB", after.HWM>>20, rssBound>>20)
	}
	// Nothing was appended.
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "bombs")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("bombs", 0); o.Offset != 0 {
		t.Errorf("log end offset %d after refused bombs, want 0", o.Offset)
	}
}
