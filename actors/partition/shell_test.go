package partition

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
)

// faultyLog is a memLog whose appends fail (failAt: the call number that
// fails, counted from 1) or land past where the log end was (skew).
type faultyLog struct {
	memLog
	calls  int
	failAt int
	skew   int64
}

var errDisk = errors.New("disk on fire")

func (f *faultyLog) AppendAt(b []byte, nowMs int64) (int64, int64, error) {
	f.calls++
	if f.calls == f.failAt {
		return -1, -1, errDisk
	}
	f.next += f.skew
	return f.memLog.AppendAt(b, nowMs)
}

func (f *faultyLog) AppendPatchedAt(head, b []byte, nowMs int64) (int64, int64, error) {
	return f.AppendAt(patchedBatch(head, b), nowMs)
}

// TestShellStorageErrorMidRequest: a storage error on the second batch
// of a request answers KAFKA_STORAGE_ERROR; the first batch is in the log
// and the state counts it, so the two still agree and the next produce
// goes at the log end.
func TestShellStorageErrorMidRequest(t *testing.T) {
	lg := &faultyLog{failAt: 2}
	sl, err := openStateLog(lg, defaultConfig(t), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	recs := append(batch(t, 4, 0, 0, 2, false), batch(t, -1, -1, -1, 3, false)...)
	res := sl.produce(recs, 1000)
	if !errors.Is(res.Err, kerr.KafkaStorageError) || res.BaseOffset != 0 {
		t.Fatalf("produce with a failing second batch: %+v", res)
	}
	// A cluster must not apply past it on this node (cluster.fsm).
	if err := replication.FailedLocally(res); !errors.Is(err, errDisk) {
		t.Fatalf("the failed produce's local failure: %v, want the disk's error", err)
	}
	if sl.st.NextOffset() != 2 || lg.NextOffset() != 2 {
		t.Fatalf("state next %d, log next %d, want 2", sl.st.NextOffset(), lg.NextOffset())
	}
	// The first batch counts for idempotence: its retry is a duplicate.
	if res := sl.produce(batch(t, 4, 0, 0, 2, false), 1000); res.Err != nil || res.BaseOffset != 0 || lg.NextOffset() != 2 {
		t.Fatalf("retry of the written batch: %+v (log next %d)", res, lg.NextOffset())
	}
	if res := sl.produce(batch(t, -1, -1, -1, 3, false), 1000); res.Err != nil || res.BaseOffset != 2 || replication.FailedLocally(res) != nil {
		t.Fatalf("produce after the error: %+v", res)
	}
}

// TestShellRefusesWritesOnDivergence: when the log puts a batch elsewhere
// than the state decided (a broken invariant), the shell does not count
// it and refuses every later write rather than let offsets drift apart.
func TestShellRefusesWritesOnDivergence(t *testing.T) {
	lg := &faultyLog{}
	sl, err := openStateLog(lg, defaultConfig(t), 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := sl.produce(batch(t, -1, -1, -1, 2, false), 1000); res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("first produce: %+v", res)
	}
	lg.skew = 5
	if res := sl.produce(batch(t, -1, -1, -1, 2, false), 1000); !errors.Is(res.Err, kerr.KafkaStorageError) || res.BaseOffset != -1 {
		t.Fatalf("produce the log misplaced: %+v", res)
	}
	if sl.st.NextOffset() != 2 || sl.st.View().HighWatermark != 2 {
		t.Fatalf("state moved past what it decided: next %d", sl.st.NextOffset())
	}
	lg.skew = 0
	// A broken invariant is not a local failure: it would be one on
	// every node, and stopping them all would take the cluster down.
	if res := sl.produce(batch(t, -1, -1, -1, 1, false), 1000); !errors.Is(res.Err, kerr.KafkaStorageError) || replication.FailedLocally(res) != nil {
		t.Fatalf("produce after divergence: %+v", res)
	}
	if m := sl.writeMarker(1, 0, true, 0, 1000); m.Err != nil {
		t.Fatalf("marker with nothing open writes nothing, even diverged: %+v", m)
	}
}
