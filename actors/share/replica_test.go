package share

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/regent-broker/regent/actors/replication"
)

// teeRepl is the leader's local replicator that also hands every command,
// through its raft encoding, to a follower's store: what the raft
// replicator does, without raft.
type teeRepl struct {
	*replication.Local
	t        *testing.T
	follower *Store
}

func (r *teeRepl) Propose(key string, cmd replication.Command, done func(any, error)) {
	kind, payload, err := replication.EncodeCommand(cmd)
	if err != nil {
		r.t.Errorf("encode %T: %v", cmd, err)
	} else if dec, err := replication.DecodeCommand(kind, payload); err != nil {
		r.t.Errorf("decode %s: %v", kind, err)
	} else if res := r.follower.Apply(dec); res != nil {
		r.t.Errorf("follower apply: %v", res)
	}
	r.Local.Propose(key, cmd, done)
}

// TestReplicaReachesTheSameState drives a leader's manager and checks
// that a follower's store, applying the same replicated commands, holds
// the same bytes and loads the same share-partition states.
func TestReplicaReachesTheSameState(t *testing.T) {
	followerDir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	follower, err := OpenStore(filepath.Join(followerDir, "share"), false, quiet)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, Config{AutoOffsetReset: "earliest", DeliveryCountLimit: 2},
		&teeRepl{Local: replication.NewLocal(), t: t, follower: follower})
	for range 4 {
		h.log.append(3, false, false, -1)
	}
	other := Key{Group: "g2", Topic: "t", Partition: 0}
	h.acquire("a", 4)
	h.ack("a", AckBatch{0, 2, []AckType{AckAccept, AckReject, AckRelease}})
	h.acquire("b", 100)
	h.ack("b", AckBatch{1, 1, []AckType{AckAccept}}) // refused: 1 is archived
	wait(t, func(r func(int16)) { h.m.ReleaseMember(key, "b", r) })
	h.acquire("c", 100)
	wait(t, func(r func(AcquireResult)) {
		h.m.Acquire(AcquireRequest{Key: other, Member: "x", MaxRecords: 1, RecordLimit: true}, r)
	})
	wait(t, func(r func([]StartOffsetResult)) {
		h.m.AlterStartOffsets("g3", []StartOffset{{Topic: "t", StartOffset: 7}}, r)
	})
	wait(t, func(r func(int16)) { h.m.DeleteGroup("g3", r) })
	wait(t, func(r func([]StartOffsetResult)) {
		h.m.AlterStartOffsets("g4", []StartOffset{{Topic: "t", StartOffset: 5}}, r)
	})

	leaderStates := h.m.mu.store.States()
	followerStates := follower.States()
	if len(leaderStates) != 3 {
		t.Fatalf("leader holds %d share-partitions, want 3", len(leaderStates))
	}
	for k, st := range leaderStates {
		f, ok := followerStates[k]
		if !ok || f.String() != st.String() {
			t.Errorf("%s: follower %v, leader %s", k, f, st)
		}
	}
	if len(followerStates) != len(leaderStates) {
		t.Errorf("follower holds %d share-partitions, leader %d", len(followerStates), len(leaderStates))
	}
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(h.dir, "share", storeLog))
	b, _ := os.ReadFile(filepath.Join(followerDir, "share", storeLog))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("the logs differ: leader %d bytes, follower %d", len(a), len(b))
	}

	// The follower, activated (a failover), serves what the leader had:
	// locks gone, delivery counts kept.
	h.dir, h.repl = followerDir, nil
	h.open()
	got := h.state()
	if want := leaderStates[key.part()].String(); got != want {
		t.Fatalf("after failover: %s, want %s", got, want)
	}
	so := wait(t, func(r func([]StartOffset)) { h.m.StartOffsets("g4", nil, r) })
	if !slices.Equal(so, []StartOffset{{Topic: "t", StartOffset: 5, Lag: 7}}) {
		t.Fatalf("g4 after failover: %+v", so)
	}
}
