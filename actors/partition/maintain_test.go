package partition

import (
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage"
)

// recordingRepl records proposals and applies none: a raft leader whose
// entries have not committed yet.
type recordingRepl struct {
	mu       sync.Mutex
	proposed []cluster.Command
}

func (r *recordingRepl) Register(string, cluster.Applier) {}
func (r *recordingRepl) Unregister(string)                {}
func (r *recordingRepl) Propose(_ string, cmd cluster.Command, _ func(any, error)) {
	r.mu.Lock()
	r.proposed = append(r.proposed, cmd)
	r.mu.Unlock()
}

func (r *recordingRepl) commands() []cluster.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]cluster.Command(nil), r.proposed...)
}

// maintainActor is a partition actor without the actor system: the test
// calls maintain and Apply directly, as the actor goroutine would.
func maintainActor(t *testing.T, segmentBytes int64, repl cluster.Replicator) *partitionActor {
	t.Helper()
	cfg := defaultConfig(t)
	cfg.SegmentBytes, cfg.RetentionBytes, cfg.RetentionMs = segmentBytes, 3000, -1
	lg, err := storage.Open(t.TempDir(), StorageOptions(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lg.Close() })
	st, err := openStateLog(lg, cfg, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Partition{Topic: "t", log: lg}
	p.waiters.set = map[*Waiter]struct{}{}
	return &partitionActor{p: p, sl: st, repl: repl, key: "partition/t/0", logger: slog.New(slog.DiscardHandler)}
}

// produceSame produces the same record sets, at the same command time, to
// every actor's state, as every node applies the same append commands.
func produceSame(t *testing.T, n int, actors ...*partitionActor) {
	t.Helper()
	now := time.Now()
	for i := range n {
		recs := batch(t, -1, -1, -1, 1+i%4, false)
		for _, a := range actors {
			// Each state patches its own copy in place.
			if res := a.sl.produce(append([]byte(nil), recs...), now.UnixMilli()); res.Err != nil {
				t.Fatalf("produce %d: %v", i, res.Err)
			}
		}
	}
}

func segmentCount(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestRetentionIsProposedNotApplied: with a replicator that has not
// committed anything, the leader's maintenance pass deletes nothing and
// proposes one retention move to the offset its log calls for; a node that
// does not lead proposes nothing.
func TestRetentionIsProposedNotApplied(t *testing.T) {
	repl := &recordingRepl{}
	a := maintainActor(t, 1000, repl)
	produceSame(t, 120, a)
	segs := segmentCount(t, a.p.log.Dir())
	want, ok := a.p.log.RetentionOffset(time.Now().UnixMilli())
	if !ok || want <= 0 {
		t.Fatalf("test log does not need retention: %d %v (size %d)", want, ok, a.p.log.Size())
	}

	a.maintain(false)
	if got := repl.commands(); len(got) != 0 {
		t.Fatalf("a node that does not lead proposed %v", got)
	}
	a.maintain(true)
	if a.p.log.StartOffset() != 0 || segmentCount(t, a.p.log.Dir()) != segs {
		t.Fatalf("retention applied locally: start %d, %d segments (had %d)", a.p.log.StartOffset(), segmentCount(t, a.p.log.Dir()), segs)
	}
	got := repl.commands()
	if len(got) != 1 {
		t.Fatalf("proposed %d commands, want 1", len(got))
	}
	cmd, ok := got[0].(*deleteRecordsCmd)
	if !ok || !cmd.retain || cmd.offset != want || cmd.CommandKind() != kindRetain || cmd.now == 0 {
		t.Fatalf("proposed %#v, want a retention move to %d", got[0], want)
	}
	// Its answer has not come: the next pass does not propose it again.
	a.maintain(true)
	if n := len(repl.commands()); n != 1 {
		t.Fatalf("%d proposals with one in flight", n)
	}
}

// TestRetentionAppliedAlikeOnEveryNode: two nodes holding the same records
// in different segments apply the leader's retention command (after the
// trip through the raft log's encoding) and end with the same log start and
// end offsets, each having deleted only its own segments below the start.
func TestRetentionAppliedAlikeOnEveryNode(t *testing.T) {
	repl := &recordingRepl{}
	leader := maintainActor(t, 1000, repl)
	follower := maintainActor(t, 2300, &recordingRepl{})
	produceSame(t, 120, leader, follower)
	if segmentCount(t, leader.p.log.Dir()) == segmentCount(t, follower.p.log.Dir()) {
		t.Fatal("test needs different segment layouts")
	}
	for round := range 2 {
		leader.retaining.Store(false) // the recording replicator never answers
		leader.maintain(true)
		cmds := repl.commands()
		if len(cmds) != round+1 {
			t.Fatalf("round %d: %d proposals", round, len(cmds))
		}
		enc := cmds[round].(*deleteRecordsCmd)
		payload := enc.AppendCommand(nil)
		dec, err := decodeRetain(payload)
		if err != nil {
			t.Fatal(err)
		}
		if *dec.(*deleteRecordsCmd) != *enc {
			t.Fatalf("round trip %#v -> %#v", enc, dec)
		}
		for _, a := range []*partitionActor{leader, follower} {
			a.Apply(dec)
		}
		ls, fs := leader.p.log.StartOffset(), follower.p.log.StartOffset()
		if ls != enc.offset || fs != enc.offset {
			t.Fatalf("round %d: start offsets leader %d follower %d, proposed %d", round, ls, fs, enc.offset)
		}
		if leader.p.log.NextOffset() != follower.p.log.NextOffset() {
			t.Fatalf("round %d: end offsets differ", round)
		}
		produceSame(t, 60, leader, follower)
	}
	if _, err := follower.p.log.Read(follower.p.log.StartOffset()-1, 100, false); err == nil {
		t.Fatal("follower still reads below its start offset")
	}
}

// TestRetentionLocalAppliesAtOnce: a single node (cluster.Local) moves its
// log start in the same pass, as before retention went through the log.
func TestRetentionLocalAppliesAtOnce(t *testing.T) {
	local := cluster.NewLocal()
	a := maintainActor(t, 1000, local)
	local.Register(a.key, a)
	produceSame(t, 120, a)
	want, ok := a.p.log.RetentionOffset(time.Now().UnixMilli())
	if !ok {
		t.Fatal("test log does not need retention")
	}
	a.maintain(true)
	if got := a.p.log.StartOffset(); got != want {
		t.Fatalf("start %d, want %d", got, want)
	}
	// The proposal's answer clears the in-flight mark (it may come later
	// than Propose's return).
	deadline := time.Now().Add(5 * time.Second)
	for a.retaining.Load() {
		if time.Now().After(deadline) {
			t.Fatal("retention proposal never answered")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRetainCommandEncoding: the retain kind carries offset and clock; a
// DeleteRecords keeps its old nine-byte form; bad lengths are refused.
func TestRetainCommandEncoding(t *testing.T) {
	del := &deleteRecordsCmd{offset: 42}
	if del.CommandKind() != kindDeleteRecords || len(del.AppendCommand(nil)) != 1+deleteLen {
		t.Fatalf("delete records encoding changed: %s %d bytes", del.CommandKind(), len(del.AppendCommand(nil)))
	}
	ret := &deleteRecordsCmd{offset: 1<<40 + 3, retain: true, now: time.Now().UnixNano()}
	p := ret.AppendCommand(nil)
	if len(p) != 1+retainLen {
		t.Fatalf("retain encodes to %d bytes", len(p))
	}
	for _, bad := range [][]byte{p[:len(p)-1], append(append([]byte(nil), p...), 0), {}} {
		if _, err := decodeRetain(bad); err == nil {
			t.Fatalf("decoded %d bad bytes", len(bad))
		}
	}
	if _, err := decodeDeleteRecords(p); err == nil {
		t.Fatal("a retain payload decoded as delete records")
	}
}
