package protocol

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/share"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// realShareServer is groupServer with a real share-partition manager
// over its topics, with the given share configs.
func realShareServer(t *testing.T, cfg share.Config) (*Server, *share.Manager) {
	t.Helper()
	s := groupServer(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	m, err := share.NewManager(share.Options{
		DataDir: t.TempDir(), Root: sys.Root, Logger: quiet,
		Logs: func(topic string, p int32) (share.Log, bool) {
			pp := s.topics.Partition(topic, p)
			if pp == nil {
				return nil, false
			}
			return share.FromPartition(pp), true
		},
		Config: func(string) share.Config { return cfg },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		sys.Shutdown()
	})
	s.SetShare(m, func(string) share.Config { return cfg })
	return s, m
}

// TestShareLockExpiryWakesFetch: with a 1 s lock, member m1 acquires
// records and never acknowledges them; member m2's fetch, waiting with a
// 20 s MaxWaitMs, gets them soon after the lock expires: the expiry wakes
// it (there is no periodic recheck to fall back on).
func TestShareLockExpiryWakesFetch(t *testing.T) {
	const lock = time.Second
	s, _ := realShareServer(t, share.Config{RecordLockDuration: lock, AutoOffsetReset: "earliest"})
	id := s.topics.Get("t").ID
	if p := produceOne(t, s, 9, "t", buildBatch(t, 0, []recordbatch.Record{{Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}})); p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}

	req := shareFetchReq(2, id, 0)
	acquired := time.Now()
	resp := call[*kmsg.ShareFetchResponse](t, s, req)
	if got := resp.Topics[0].Partitions[0].AcquiredRecords; len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 1 {
		t.Fatalf("m1 acquired %+v", resp.Topics[0].Partitions[0])
	}

	req = shareFetchReq(2, id, 0)
	req.MemberID = kmsg.StringPtr("m2")
	req.MaxWaitMillis = 20000
	resp = call[*kmsg.ShareFetchResponse](t, s, req)
	woke := time.Since(acquired)
	got := resp.Topics[0].Partitions[0].AcquiredRecords
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 1 || got[0].DeliveryCount != 2 {
		t.Fatalf("m2 acquired %+v", resp.Topics[0].Partitions[0])
	}
	// The lock ends 1 s after m1's acquisition; woken by the expiry, m2
	// has the records well before a 1 s recheck could have given them
	// (up to 2 s) and far before its 20 s deadline.
	// Share-partition clocks are whole milliseconds (as Kafka's), so the
	// lock's deadline and its timer lose up to 1 ms each to truncation:
	// the expiry may come just before the test's own 1 s (999.85 ms seen
	// once). The lower bound only says the expiry did not come early.
	if woke < lock-50*time.Millisecond || woke > lock+500*time.Millisecond {
		t.Fatalf("m2 got the records %v after m1 acquired them, want within 500 ms of the %v lock's end", woke, lock)
	}
	t.Logf("m2 got the expired records %v after the lock's end", woke-lock)
}
