package partition

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// idempotentAt is one idempotent batch of one record stamped tsMs.
func idempotentAt(t *testing.T, pid int64, tsMs int64) []byte {
	t.Helper()
	h := recordbatch.Header{ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0, FirstTimestamp: tsMs, MaxTimestamp: tsMs}
	b, err := recordbatch.Build(h, []recordbatch.Record{{Value: []byte("v"), KeyNull: true}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExpiryProposedNotApplied: the leader's maintenance proposes one pass
// with its clock and producer.id.expiration.ms when a producer is past it
// and drops nothing itself; a node that does not lead proposes nothing;
// nothing due, nothing proposed.
func TestExpiryProposedNotApplied(t *testing.T) {
	repl := &recordingRepl{}
	a := maintainActor(t, 1<<20, repl)
	now := time.Now()
	if res := a.sl.produce(idempotentAt(t, 5, now.UnixMilli()), now.UnixMilli()); res.Err != nil {
		t.Fatal(res.Err)
	}
	a.maintain(true)
	if got := repl.commands(); len(got) != 0 {
		t.Fatalf("proposed %v with nothing due", got)
	}
	old := now.Add(-25 * time.Hour).UnixMilli()
	if res := a.sl.produce(idempotentAt(t, 6, old), now.UnixMilli()); res.Err != nil {
		t.Fatal(res.Err)
	}
	a.maintain(false)
	if got := repl.commands(); len(got) != 0 {
		t.Fatalf("a node that does not lead proposed %v", got)
	}
	a.maintain(true)
	got := repl.commands()
	if len(got) != 1 {
		t.Fatalf("proposed %d commands, want 1", len(got))
	}
	cmd, ok := got[0].(*expireCmd)
	if !ok || cmd.expirationMs != logconfig.DefaultProducerIDExpirationMs || cmd.now < now.UnixNano() {
		t.Fatalf("proposed %#v", got[0])
	}
	if n := len(a.sl.st.ProducerInfos()); n != 2 {
		t.Fatalf("%d producers before the pass is applied, want 2", n)
	}
	a.maintain(true)
	if n := len(repl.commands()); n != 1 {
		t.Fatalf("%d proposals with one in flight", n)
	}
}

// TestExpiryAppliedAlikeOnEveryNode: the command, through its encoding,
// drops the same producers on two nodes whatever their own config (the
// follower's says a year), and a producer of the pass's own second stays.
func TestExpiryAppliedAlikeOnEveryNode(t *testing.T) {
	repl := &recordingRepl{}
	leader := maintainActor(t, 1<<20, repl)
	follower := maintainActor(t, 1<<20, &recordingRepl{})
	cfg := follower.sl.st.Config()
	cfg.ProducerIDExpirationMs = 365 * 86_400_000
	follower.sl.st.SetConfig(cfg)
	cfg = leader.sl.st.Config()
	cfg.ProducerIDExpirationMs = 60_000
	leader.sl.st.SetConfig(cfg)
	now := time.Now()
	for pid, age := range map[int64]time.Duration{1: time.Hour, 2: 2 * time.Minute, 3: 0} {
		for _, a := range []*partitionActor{leader, follower} {
			if res := a.sl.produce(idempotentAt(t, pid, now.Add(-age).UnixMilli()), now.UnixMilli()); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
	}
	leader.maintain(true)
	cmds := repl.commands()
	if len(cmds) != 1 {
		t.Fatalf("%d proposals", len(cmds))
	}
	enc := cmds[0].(*expireCmd)
	dec, err := decodeExpire(enc.AppendCommand(nil))
	if err != nil || *dec.(*expireCmd) != *enc {
		t.Fatalf("round trip %#v -> %#v, %v", enc, dec, err)
	}
	follower.sl.snapshotPath = filepath.Join(t.TempDir(), "producer-state.json")
	if err := follower.sl.snapshot(); err != nil { // holds the three producers
		t.Fatal(err)
	}
	for _, a := range []*partitionActor{leader, follower} {
		res := a.Apply(dec)
		if r, ok := res.(expireResult); !ok || r.expired != 2 {
			t.Fatalf("apply: %#v, want 2 expired", res)
		}
		infos := a.sl.st.ProducerInfos()
		if len(infos) != 1 || infos[0].ProducerID != 3 {
			t.Fatalf("producers left %+v, want 3", infos)
		}
	}
	// The pass is not in the log: the follower snapshotted after it, so a
	// restart does not bring the dropped producers back.
	reopened, err := openStateLog(follower.p.log, follower.sl.st.Config(), 0, follower.sl.snapshotPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if infos := reopened.st.ProducerInfos(); len(infos) != 1 || infos[0].ProducerID != 3 {
		t.Fatalf("reopened with producers %+v, want 3 alone", infos)
	}
}

// TestExpiryLocalAppliesAtOnce: a single node drops the state in the
// maintenance pass itself.
func TestExpiryLocalAppliesAtOnce(t *testing.T) {
	local := cluster.NewLocal()
	a := maintainActor(t, 1<<20, local)
	local.Register(a.key, a)
	now := time.Now()
	if res := a.sl.produce(idempotentAt(t, 9, now.Add(-48*time.Hour).UnixMilli()), now.UnixMilli()); res.Err != nil {
		t.Fatal(res.Err)
	}
	a.maintain(true)
	if n := len(a.sl.st.ProducerInfos()); n != 0 {
		t.Fatalf("%d producers after the pass", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for a.expiring.Load() {
		if time.Now().After(deadline) {
			t.Fatal("expiry proposal never answered")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestExpireCommandEncoding(t *testing.T) {
	c := &expireCmd{now: time.Now().UnixNano(), expirationMs: 86_400_000}
	p := c.AppendCommand(nil)
	if len(p) != 1+expireLen || c.CommandKind() != kindExpire {
		t.Fatalf("%s encodes to %d bytes", c.CommandKind(), len(p))
	}
	zero := (&expireCmd{now: 1}).AppendCommand(nil)
	for _, bad := range [][]byte{p[:len(p)-1], append(append([]byte(nil), p...), 0), {}, zero} {
		if _, err := decodeExpire(bad); err == nil {
			t.Fatalf("decoded %x", bad)
		}
	}
}
