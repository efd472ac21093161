package txn

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/cluster/clustertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// checkNotCoordinator checks that every API of c answers NOT_COORDINATOR.
func checkNotCoordinator(t *testing.T, c *Coordinator) {
	t.Helper()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, kerr.NotCoordinator) {
			t.Fatalf("%s: %v, want NOT_COORDINATOR", what, err)
		}
	}
	check("init", wait(t, "init", func(r func(Result)) { c.InitProducerID("x", 1000, nil, r) }).Err)
	check("add", wait(t, "add", func(r func(Result)) { c.AddPartitions("x", 1, 0, []TopicPartition{t0}, false, r) }).Err)
	check("verify", wait(t, "verify", func(r func(Result)) { c.VerifyPartitions("x", 1, 0, []TopicPartition{t0}, r) }).Err)
	check("add offsets", wait(t, "add offsets", func(r func(Result)) { c.AddOffsets("x", 1, 0, "g", r) }).Err)
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID = 3, "x", "g", 1
	check("commit offsets", wait(t, "commit offsets", func(r func(error)) {
		c.CommitOffsets(req, func(_ *kmsg.TxnOffsetCommitResponse, err error) { r(err) })
	}))
	check("end", wait(t, "end", func(r func(Result)) { c.EndTxn("x", 1, 0, true, false, r) }).Err)
	check("describe", wait(t, "describe", func(r func(error)) { c.Describe("x", func(_ *Txn, err error) { r(err) }) }))
	if got := c.List(ListFilter{}); len(got) != 0 {
		t.Fatalf("standby lists %+v", got)
	}
}

func (h *harness) state(id string) State {
	tx, err := h.describe(id)
	if err != nil {
		return -1
	}
	return tx.State
}

func (h *harness) heldMarkers(tp TopicPartition) int {
	p := h.parts[tp]
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// TestCoordinatorFailover: a standby coordinator applies the active one's
// records and, activated, completes the transaction it finds preparing
// (markers through its own partitions and group sink) and times out the
// open one; leadership then moves back. Every persist answers late, from
// the fake FSM goroutine.
func TestCoordinatorFailover(t *testing.T) {
	r := clustertest.New(t, 2)
	r.SetDelay(5 * time.Millisecond)
	// The standby opens first, as every node's stores are open before raft
	// applies anything: it applies the leader's epoch raise too.
	hb := newHarness(t, func(o *Options) { o.Repl, o.Standby = r.Node(1), true })
	ha := newHarness(t, func(o *Options) { o.Repl = r.Node(0) })
	checkNotCoordinator(t, hb.c)

	// a: partitions and a group's offsets, then EndTxn commit with t0's
	// marker held, so a stays in PrepareCommit.
	mustOK(t, "init a", ha.init("a", 60000))
	mustOK(t, "add a", ha.add("a", 101, 0, t0, t1))
	mustOK(t, "add offsets", wait(t, "add offsets", func(r func(Result)) { ha.c.AddOffsets("a", 101, 0, "g", r) }))
	ha.parts[t0].hold = true
	ended := make(chan Result, 1)
	ha.c.EndTxn("a", 101, 0, true, false, func(r Result) { ended <- r })
	testwait.For(t, "a's t0 marker sent", testwait.Default, func() bool { return ha.heldMarkers(t0) == 1 })
	if s := ha.state("a"); s != StatePrepareCommit {
		t.Fatalf("a is %s", s)
	}
	// b: open, with a deadline that must be kept across the failover.
	mustOK(t, "init b", ha.init("b", 1500))
	mustOK(t, "add b", ha.add("b", 102, 0, t1))
	bStart := time.Now()

	r.SetLeader(1)
	if res := ha.add("b", 102, 0, t0); !errors.Is(res.Err, kerr.NotCoordinator) {
		t.Fatalf("add on a deposed leader: %v", res.Err)
	}
	ha.c.Deactivate()
	ha.c.Deactivate()
	select {
	case res := <-ended:
		if !errors.Is(res.Err, kerr.NotCoordinator) {
			t.Fatalf("waiting EndTxn answered %v", res.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting EndTxn not answered at Deactivate")
	}
	must(t, hb.c.Activate())
	must(t, hb.c.Activate())
	checkNotCoordinator(t, ha.c)
	// The new coordinator's epoch is above the old one's (replicated:
	// ha raised it to 0, hb's activation to 1), and its markers carry it.
	if e := hb.c.CoordinatorEpoch(); e != 1 {
		t.Fatalf("new coordinator's epoch %d, want 1", e)
	}

	testwait.For(t, "a completed on b", testwait.Default, func() bool { return hb.state("a") == StateCompleteCommit })
	for _, tp := range []TopicPartition{t0, t1} {
		if got := hb.parts[tp].got(); !slices.Contains(got, "commit 101/0") {
			t.Fatalf("%v markers from the new coordinator: %v", tp, got)
		}
		if got := hb.parts[tp].epochs(); !slices.Contains(got, 1) || slices.Contains(got, 0) {
			t.Fatalf("%v markers' coordinator epochs from the new coordinator: %v, want 1", tp, got)
		}
	}
	if got := hb.sink.got(); !slices.Contains(got, "complete g 101 commit=true") {
		t.Fatalf("group completion from the new coordinator: %v", got)
	}
	mustOK(t, "EndTxn retried on the new coordinator", hb.end("a", 101, 0, true))

	if s := hb.state("b"); s != StateOngoing {
		t.Fatalf("b is %s on the new coordinator", s)
	}
	testwait.For(t, "b timed out on b", testwait.Default, func() bool { return hb.state("b") == StateCompleteAbort })
	if el := time.Since(bStart); el < 1400*time.Millisecond {
		t.Fatalf("b aborted after %v, before its deadline", el)
	}
	if got := hb.parts[t1].got(); !slices.Contains(got, "abort 102/1") {
		t.Fatalf("timeout markers: %v", got)
	}
	if got := ha.parts[t1].got(); slices.Contains(got, "abort 102/1") {
		t.Fatalf("the standby coordinator timed b out: %v", got)
	}

	// Back to a, which applied b's records while on standby.
	r.SetLeader(0)
	hb.c.Deactivate()
	must(t, ha.c.Activate())
	checkNotCoordinator(t, hb.c)
	if s := ha.state("a"); s != StateCompleteCommit {
		t.Fatalf("a is %s after failing back", s)
	}
	tx, err := ha.describe("b")
	if err != nil || tx.State != StateCompleteAbort || tx.ProducerEpoch != 1 {
		t.Fatalf("b after failing back: %+v %v", tx, err)
	}
	if res := ha.end("b", 102, 0, true); !errors.Is(res.Err, kerr.ProducerFenced) {
		t.Fatalf("end of the fenced producer: %v", res.Err)
	}
	if got := ha.c.List(ListFilter{}); len(got) != 2 {
		t.Fatalf("list after failing back: %+v", got)
	}

	must(t, hb.c.Close())
	if err := hb.c.Activate(); err == nil {
		t.Fatal("activated a closed coordinator")
	}
}

// TestCoordinatorTimeoutPersistFails: a timeout whose abort cannot be
// written (no leader) is retried, and the transaction aborts once writes
// go through again.
func TestCoordinatorTimeoutPersistFails(t *testing.T) {
	r := clustertest.New(t, 1)
	h := newHarness(t, func(o *Options) { o.Repl = r.Node(0) })
	mustOK(t, "init", h.init("b", 200))
	mustOK(t, "add", h.add("b", 101, 0, t1))
	r.SetLeader(-1)
	// The timeout fires (200ms) and its abort is refused. The refusal is
	// counted once the actor has its answer, and describe queues behind
	// the timer's handling on the actor, so the state seen is the one
	// the failed abort left.
	testwait.For(t, "the timeout's abort to be refused", testwait.Default, func() bool { return r.Refused() >= 1 })
	if s := h.state("b"); s != StateOngoing {
		t.Fatalf("b is %s though nothing could be written", s)
	}
	r.SetLeader(0)
	testwait.For(t, "b timed out", testwait.Default, func() bool { return h.state("b") == StateCompleteAbort })
	if got := h.parts[t1].got(); len(got) != 1 || got[0] != "abort 101/1" {
		t.Fatalf("markers: %v", got)
	}
}

// TestCoordinatorDeactivateUnblocksPersist: an actor waiting for a persist
// answer that never comes does not hold up Deactivate, and its request is
// answered NOT_COORDINATOR.
func TestCoordinatorDeactivateUnblocksPersist(t *testing.T) {
	r := clustertest.New(t, 2)
	ha := newHarness(t, func(o *Options) { o.Repl = r.Node(0) })
	hb := newHarness(t, func(o *Options) { o.Repl, o.Standby = r.Node(1), true })
	mustOK(t, "init", ha.init("a", 60000))
	r.SetStall(true)
	added := make(chan Result, 1)
	ha.c.AddPartitions("a", 101, 0, []TopicPartition{t0}, false, func(res Result) { added <- res })
	testwait.For(t, "proposal held", testwait.Default, func() bool { return r.HeldCount() == 1 })
	start := time.Now()
	ha.c.Deactivate()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("deactivate took %v", d)
	}
	select {
	case res := <-added:
		if !errors.Is(res.Err, kerr.NotCoordinator) {
			t.Fatalf("blocked add answered %v", res.Err)
		}
	case <-time.After(time.Second):
		t.Fatal("blocked add not answered")
	}
	// The write lands after all; the next coordinator has it.
	r.SetStall(false)
	r.SetLeader(1)
	r.Release()
	testwait.For(t, "applied on b", testwait.Default, func() bool {
		st, ok := hb.c.store.Txns()["a"]
		return ok && st.State == StateOngoing
	})
	must(t, hb.c.Activate())
	if res := wait(t, "verify", func(r func(Result)) { hb.c.VerifyPartitions("a", 101, 0, []TopicPartition{t0}, r) }); res.Err != nil || res.Partitions[0] != nil {
		t.Fatalf("verify on b: %+v", res)
	}
}

// TestCoordinatorStandbyOpen: a coordinator opened on standby over a log
// resumes nothing until activated.
func TestCoordinatorStandbyOpen(t *testing.T) {
	standby := false
	now := time.Now
	h := newHarness(t, func(o *Options) { o.Standby, o.Now = standby, func() time.Time { return now() } })
	mustOK(t, "init", h.init("b", 200))
	mustOK(t, "add", h.add("b", 101, 0, t1))
	// Reopened an hour later: b's deadline has long passed, so anything
	// that armed its timeout would abort it at once.
	standby = true
	later := time.Now().Add(time.Hour)
	now = func() time.Time { return later }
	h.reopen()
	checkNotCoordinator(t, h.c)
	// Timeouts belong to the transactions' actors: on standby there are
	// none, so none can fire.
	h.c.mu.Lock()
	actors, active := len(h.c.mu.actors), h.c.mu.active
	h.c.mu.Unlock()
	if actors != 0 || active {
		t.Fatalf("standby coordinator runs %d actors (active %v)", actors, active)
	}
	if got := h.parts[t1].got(); len(got) != 0 {
		t.Fatalf("markers written on standby: %v", got)
	}
	must(t, h.c.Activate())
	testwait.For(t, "b timed out", testwait.Default, func() bool { return h.state("b") == StateCompleteAbort })
}

func TestPutCmdRoundTrip(t *testing.T) {
	for _, tx := range []*Txn{sampleTxn("a", 3), {ID: "gone", State: StateDead}} {
		orig, err := newPutCmd(tx)
		must(t, err)
		kind, payload, err := cluster.EncodeCommand(orig)
		must(t, err)
		if kind != "txn.put" {
			t.Fatalf("kind %q", kind)
		}
		cmd, err := cluster.DecodeCommand(kind, bytes.Clone(payload))
		must(t, err)
		got := cmd.(*putCmd)
		if got.id != tx.ID || got.dead != (tx.State == StateDead) || !bytes.Equal(got.frame, orig.frame) {
			t.Fatalf("decoded %+v, want %+v", got, orig)
		}
		for n := range len(payload) {
			if _, err := cluster.DecodeCommand(kind, payload[:n]); err == nil {
				t.Fatalf("a payload cut at %d bytes decoded", n)
			}
		}
		bad := bytes.Clone(payload)
		bad[len(bad)-1] ^= 0xff
		if _, err := cluster.DecodeCommand(kind, bad); err == nil {
			t.Fatal("a corrupt payload decoded")
		}
		if _, err := cluster.DecodeCommand(kind, append(bytes.Clone(payload), 0)); err == nil {
			t.Fatal("a payload with trailing bytes decoded")
		}
	}
	if _, err := newPutCmd(&Txn{ID: "f", State: StatePrepareEpochFence}); err == nil {
		t.Fatal("PrepareEpochFence encoded")
	}

	// The decoded command writes what the original does.
	s, _, err := OpenStore(filepath.Join(t.TempDir(), "a"), false, nil)
	must(t, err)
	tx := sampleTxn("a", 3)
	orig, err := newPutCmd(tx)
	must(t, err)
	_, payload, _ := cluster.EncodeCommand(orig)
	cmd, err := cluster.DecodeCommand("txn.put", payload)
	must(t, err)
	if res := s.Apply(cmd); res != nil {
		t.Fatal(res)
	}
	got := s.Txns()["a"]
	if got == nil || formatTxn(got) != formatTxn(tx) {
		t.Fatalf("applied %+v, want %+v", got, tx)
	}
	must(t, s.Close())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
