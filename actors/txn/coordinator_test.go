package txn

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/testwait"
)

// fakePartition records markers; fail makes the next n writes fail, hold
// keeps replies until released.
type fakePartition struct {
	mu      sync.Mutex
	markers []string
	fail    int
	hold    bool
	held    []func(error)
	// refuse answers the next writes with these errors, in order.
	refuse []error
	// coordEpochs is every marker write's coordinator epoch.
	coordEpochs []int32
}

func (p *fakePartition) WriteTxnMarker(pid int64, epoch int16, commit bool, coordEpoch int32, reply func(error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.coordEpochs = append(p.coordEpochs, coordEpoch)
	if len(p.refuse) > 0 {
		err := p.refuse[0]
		p.refuse = p.refuse[1:]
		go reply(err)
		return
	}
	if p.hold {
		p.held = append(p.held, reply)
		return
	}
	if p.fail > 0 {
		p.fail--
		go reply(kerr.NotLeaderForPartition)
		return
	}
	kind := "abort"
	if commit {
		kind = "commit"
	}
	p.markers = append(p.markers, fmt.Sprintf("%s %d/%d", kind, pid, epoch))
	go reply(nil)
}

func (p *fakePartition) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.markers...)
}

// fakeSink is the group side.
type fakeSink struct {
	mu    sync.Mutex
	calls []string
}

func (s *fakeSink) TxnCommitOffsets(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse)) {
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("stage %s %d/%d", req.Group, req.ProducerID, req.ProducerEpoch))
	s.mu.Unlock()
	go reply(kmsg.NewPtrTxnOffsetCommitResponse())
}

func (s *fakeSink) CompleteTxn(group string, pid int64, commit bool, reply func(error)) {
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("complete %s %d commit=%v", group, pid, commit))
	s.mu.Unlock()
	go reply(nil)
}

func (s *fakeSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

type harness struct {
	t     *testing.T
	dir   string
	sys   *actor.ActorSystem
	parts map[TopicPartition]*fakePartition
	// partsMu guards parts against deletePart (the lookup runs on the
	// actors' goroutines).
	partsMu sync.Mutex
	sink    *fakeSink
	c       *Coordinator
	pids    int64
	opts    func(*Options)
}

func newHarness(t *testing.T, opts func(*Options)) *harness {
	h := &harness{t: t, dir: t.TempDir(), parts: map[TopicPartition]*fakePartition{}, sink: &fakeSink{}, pids: 100, opts: opts}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	for _, tp := range []TopicPartition{{"t", 0}, {"t", 1}, {"u", 0}} {
		h.parts[tp] = &fakePartition{}
	}
	h.open()
	t.Cleanup(func() {
		if h.c != nil {
			_ = h.c.Close()
		}
		h.sys.Shutdown()
	})
	return h
}

func (h *harness) open() {
	var mu sync.Mutex
	o := Options{
		DataDir: h.dir,
		Root:    h.sys.Root,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		NextProducerID: func() (int64, error) {
			mu.Lock()
			defer mu.Unlock()
			h.pids++
			return h.pids, nil
		},
		Partitions: func(topic string, p int32) TxnPartition {
			h.partsMu.Lock()
			defer h.partsMu.Unlock()
			if fp := h.parts[TopicPartition{topic, p}]; fp != nil {
				return fp
			}
			return nil
		},
		Offsets: h.sink,
	}
	if h.opts != nil {
		h.opts(&o)
	}
	c, err := NewCoordinator(o)
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
}

func (h *harness) reopen() {
	h.t.Helper()
	if err := h.c.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

func wait[T any](t *testing.T, what string, call func(func(T))) T {
	t.Helper()
	ch := make(chan T, 1)
	call(func(v T) { ch <- v })
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer", what)
		panic("unreachable")
	}
}

func (h *harness) init(id string, timeoutMs int32) Result {
	return wait(h.t, "init", func(r func(Result)) { h.c.InitProducerID(id, timeoutMs, nil, r) })
}

func (h *harness) add(id string, pid int64, epoch int16, parts ...TopicPartition) Result {
	return wait(h.t, "add", func(r func(Result)) { h.c.AddPartitions(id, pid, epoch, parts, false, r) })
}

func (h *harness) end(id string, pid int64, epoch int16, commit bool) Result {
	return wait(h.t, "end", func(r func(Result)) { h.c.EndTxn(id, pid, epoch, commit, false, r) })
}

func (h *harness) describe(id string) (*Txn, error) {
	type out struct {
		t   *Txn
		err error
	}
	o := wait(h.t, "describe", func(r func(out)) { h.c.Describe(id, func(t *Txn, err error) { r(out{t, err}) }) })
	return o.t, o.err
}

func mustOK(t *testing.T, what string, r Result) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: %v", what, r.Err)
	}
}

var (
	t0 = TopicPartition{"t", 0}
	t1 = TopicPartition{"t", 1}
)

func TestCoordinatorCommit(t *testing.T) {
	h := newHarness(t, nil)
	r := h.init("a", 60000)
	mustOK(t, "init", r)
	if r.ProducerID != 101 || r.ProducerEpoch != 0 {
		t.Fatalf("init: %+v", r)
	}
	mustOK(t, "add", h.add("a", 101, 0, t0, t1))
	mustOK(t, "end", h.end("a", 101, 0, true))
	// The answer came after the markers.
	for _, tp := range []TopicPartition{t0, t1} {
		if got := h.parts[tp].got(); len(got) != 1 || got[0] != "commit 101/0" {
			t.Fatalf("%v markers: %v", tp, got)
		}
	}
	if got := h.parts[TopicPartition{"u", 0}].got(); len(got) != 0 {
		t.Fatalf("marker on a partition not in the transaction: %v", got)
	}
	tx, err := h.describe("a")
	if err != nil || tx.State != StateCompleteCommit {
		t.Fatalf("describe: %+v %v", tx, err)
	}
	if _, err := h.describe("nope"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("describe unknown: %v", err)
	}
	if r := h.end("nope", 1, 0, true); !errors.Is(r.Err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("end unknown: %v", r.Err)
	}
	if got := h.c.List(ListFilter{States: []State{StateCompleteCommit}}); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("list: %+v", got)
	}
}

func TestCoordinatorOffsets(t *testing.T) {
	h := newHarness(t, nil)
	mustOK(t, "init", h.init("a", 60000))
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = 3, "a", "g", 101, 0
	type out struct {
		resp *kmsg.TxnOffsetCommitResponse
		err  error
	}
	commit := func() out {
		return wait(t, "commit offsets", func(r func(out)) {
			h.c.CommitOffsets(req, func(resp *kmsg.TxnOffsetCommitResponse, err error) { r(out{resp, err}) })
		})
	}
	if o := commit(); !errors.Is(o.err, kerr.InvalidTxnState) {
		t.Fatalf("offsets before AddOffsetsToTxn: %v", o.err)
	}
	mustOK(t, "add offsets", wait(t, "add offsets", func(r func(Result)) { h.c.AddOffsets("a", 101, 0, "g", r) }))
	if o := commit(); o.err != nil || o.resp == nil {
		t.Fatalf("offsets: %+v", o)
	}
	mustOK(t, "end", h.end("a", 101, 0, true))
	want := []string{"stage g 101/0", "complete g 101 commit=true"}
	if got := h.sink.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sink calls %v, want %v", got, want)
	}
}

// TestCoordinatorCheckOffsets: a check alone (the group's coordinator is
// on another node and stages itself) refuses a group not in the
// transaction, adds it at v5, and stages nothing; the completion still
// reaches the group.
func TestCoordinatorCheckOffsets(t *testing.T) {
	h := newHarness(t, nil)
	mustOK(t, "init", h.init("a", 60000))
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = 3, "a", "g", 101, 0
	check := func() error {
		return wait(t, "check offsets", func(r func(error)) { h.c.CheckOffsets(req, r) })
	}
	if err := check(); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("check before AddOffsetsToTxn: %v", err)
	}
	req.Version = 5 // KIP-890 part 2: the check adds the group
	if err := check(); err != nil {
		t.Fatalf("v5 check: %v", err)
	}
	req.Version = 3
	if err := check(); err != nil {
		t.Fatalf("check with the group added: %v", err)
	}
	req.ProducerEpoch = 1
	if err := check(); err == nil {
		t.Fatal("check with a wrong epoch passed")
	}
	mustOK(t, "end", h.end("a", 101, 0, true))
	want := []string{"complete g 101 commit=true"}
	if got := h.sink.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sink calls %v, want %v", got, want)
	}
}

// A transaction found preparing on open is completed; an open one keeps
// its deadline across the restart and is then aborted with a fenced epoch.
func TestCoordinatorRecovery(t *testing.T) {
	h := newHarness(t, nil)
	mustOK(t, "init a", h.init("a", 60000))
	mustOK(t, "add a", h.add("a", 101, 0, t0))
	h.parts[t0].hold = true
	ended := make(chan Result, 1)
	h.c.EndTxn("a", 101, 0, true, false, func(r Result) { ended <- r })
	testwait.For(t, "marker sent", testwait.Default, func() bool {
		h.parts[t0].mu.Lock()
		defer h.parts[t0].mu.Unlock()
		return len(h.parts[t0].held) == 1
	})

	mustOK(t, "init b", h.init("b", 300))
	mustOK(t, "add b", h.add("b", 102, 0, t1))
	start := time.Now()

	// The held marker never answers: the "crash". The next open's
	// markers go through.
	h.parts[t0].mu.Lock()
	h.parts[t0].hold = false
	h.parts[t0].mu.Unlock()
	h.reopen()
	if r := <-ended; !errors.Is(r.Err, kerr.NotCoordinator) {
		t.Fatalf("end answered %v at close", r.Err)
	}

	testwait.For(t, "a completed", testwait.Default, func() bool {
		tx, _ := h.describe("a")
		return tx != nil && tx.State == StateCompleteCommit
	})
	if got := h.parts[t0].got(); len(got) != 1 || got[0] != "commit 101/0" {
		t.Fatalf("markers after recovery: %v", got)
	}
	// The retried EndTxn of the client now succeeds.
	mustOK(t, "end retry", h.end("a", 101, 0, true))

	tx, _ := h.describe("b")
	if tx.State != StateOngoing {
		t.Fatalf("b after restart: %s", tx.State)
	}
	testwait.For(t, "b timed out", testwait.Default, func() bool {
		tx, _ := h.describe("b")
		return tx.State == StateCompleteAbort
	})
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("b aborted after %v, before its deadline", el)
	}
	if got := h.parts[t1].got(); len(got) != 1 || got[0] != "abort 102/1" {
		t.Fatalf("timeout markers: %v", got)
	}
	if r := h.end("b", 102, 0, true); !errors.Is(r.Err, kerr.ProducerFenced) {
		t.Fatalf("end after timeout: %v", r.Err)
	}
}

// A marker that fails is retried; the client is answered at the first
// failure (the outcome is durable) and the transaction completes later.
func TestCoordinatorMarkerRetry(t *testing.T) {
	h := newHarness(t, nil)
	mustOK(t, "init", h.init("a", 60000))
	mustOK(t, "add", h.add("a", 101, 0, t0, t1))
	h.parts[t1].fail = 2
	mustOK(t, "end", h.end("a", 101, 0, false))
	testwait.For(t, "complete", testwait.Default, func() bool {
		tx, _ := h.describe("a")
		return tx.State == StateCompleteAbort
	})
	if got := h.parts[t1].got(); len(got) != 1 || got[0] != "abort 101/0" {
		t.Fatalf("markers: %v", got)
	}
	if got := h.parts[t0].got(); len(got) != 1 {
		t.Fatalf("a marker that succeeded was written again: %v", got)
	}
}

func TestCoordinatorFenceOnInit(t *testing.T) {
	h := newHarness(t, nil)
	mustOK(t, "init", h.init("a", 60000))
	mustOK(t, "add", h.add("a", 101, 0, t0))
	if r := h.init("a", 60000); !errors.Is(r.Err, kerr.ConcurrentTransactions) {
		t.Fatalf("init over an open transaction: %v", r.Err)
	}
	var r Result
	testwait.For(t, "init after the abort", testwait.Default, func() bool {
		r = h.init("a", 60000)
		return r.Err == nil
	})
	if r.ProducerID != 101 || r.ProducerEpoch != 2 {
		t.Fatalf("init after fence: %+v", r)
	}
	if got := h.parts[t0].got(); len(got) != 1 || got[0] != "abort 101/1" {
		t.Fatalf("fence markers: %v", got)
	}
}

func TestCoordinatorExpiry(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.IDExpiration = 50 * time.Millisecond })
	mustOK(t, "init", h.init("a", 60000))
	testwait.For(t, "expiry", testwait.Default, func() bool { return len(h.c.List(ListFilter{})) == 0 })
	if _, err := h.describe("a"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("describe expired: %v", err)
	}
	r := h.init("a", 60000)
	mustOK(t, "init again", r)
	if r.ProducerID != 102 {
		t.Fatalf("expired id reused producer: %+v", r)
	}
	h.reopen()
	if tx, err := h.describe("a"); err != nil || tx.ProducerID != 102 {
		t.Fatalf("after reopen: %+v %v", tx, err)
	}
}

func TestCoordinatorInvalidTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxTimeout = time.Second })
	if r := h.init("a", 1001); !errors.Is(r.Err, kerr.InvalidTransactionTimeout) {
		t.Fatalf("init above max: %v", r.Err)
	}
	h.c.o.NextProducerID = func() (int64, error) { return -1, errors.New("allocator down") }
	if r := h.init("a", 1000); r.Err == nil {
		t.Fatal("init with a failing allocator succeeded")
	}
	// The actor spawned for the refused request went away.
	testwait.For(t, "actor retired", testwait.Default, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return len(h.c.mu.actors) == 0
	})
}

// TestCoordinatorBudget: with MaxIDs 100, 300 ids made up one after
// another leave the coordinator holding at most 100. The least recently
// updated idle ids go first; an id with a transaction open and an id used
// every few requests stay; an expired id's zombie is refused and the id
// starts again under a new producer id; the store holds what the
// coordinator does across a reopen.
func TestCoordinatorBudget(t *testing.T) {
	const limit = 100
	var clock atomic.Int64
	base := time.UnixMilli(1_700_000_000_000)
	h := newHarness(t, func(o *Options) {
		o.MaxIDs = limit
		o.Now = func() time.Time { return base.Add(time.Duration(clock.Add(1)) * time.Millisecond) }
	})
	open := h.init("open", 600000)
	mustOK(t, "init open", open)
	mustOK(t, "add open", h.add("open", open.ProducerID, open.ProducerEpoch, t0))
	first := h.init("flood-000", 60000)
	mustOK(t, "init flood-000", first)
	recent := h.init("recent", 60000)
	mustOK(t, "init recent", recent)
	for i := 1; i < 300; i++ {
		mustOK(t, "init flood", h.init(fmt.Sprintf("flood-%03d", i), 60000))
		if i%10 == 0 {
			r := h.init("recent", 60000)
			mustOK(t, "init recent", r)
			recent = r
		}
		if held, _ := h.c.Held(); held > limit {
			t.Fatalf("after %d ids: held %d, budget %d", i+3, held, limit)
		}
	}
	testwait.For(t, "evictions persisted", testwait.Default, func() bool { return h.evictionsPending() == 0 })
	held := h.c.List(ListFilter{})
	t.Logf("300 ids made up, budget %d: %d held", limit, len(held))

	if tx, err := h.describe("open"); err != nil || tx.State != StateOngoing {
		t.Fatalf("the open transaction's id: %+v %v", tx, err)
	}
	if tx, err := h.describe("recent"); err != nil || tx.ProducerID != recent.ProducerID || tx.ProducerEpoch != recent.ProducerEpoch {
		t.Fatalf("the recently used id: %+v %v (last init %+v)", tx, err, recent)
	}
	if _, err := h.describe("flood-000"); !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("the oldest idle id is still held: %v", err)
	}
	if r := h.add("flood-000", first.ProducerID, first.ProducerEpoch, t1); !errors.Is(r.Err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("a zombie of an expired id: %v", r.Err)
	}
	again := h.init("flood-000", 60000)
	mustOK(t, "init flood-000 again", again)
	if again.ProducerID == first.ProducerID || again.ProducerEpoch != 0 {
		t.Fatalf("expired id came back as %+v, was %+v", again, first)
	}

	testwait.For(t, "evictions persisted", testwait.Default, func() bool { return h.evictionsPending() == 0 })
	before := h.c.List(ListFilter{})
	h.reopen()
	after := h.c.List(ListFilter{})
	if len(after) != len(before) {
		t.Fatalf("reopened store holds %d ids, the coordinator held %d", len(after), len(before))
	}
	for i := range before {
		if after[i].ID != before[i].ID || after[i].ProducerID != before[i].ProducerID {
			t.Fatalf("reopened store differs at %d: %+v, held %+v", i, after[i], before[i])
		}
	}
}

// evictionsPending is the ids asked to expire for the budget whose actors
// have not answered yet.
func (h *harness) evictionsPending() int {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return len(h.c.mu.evicting)
}

// TestCoordinatorBudgetRefusesWhenNoneIdle: every held id has a
// transaction open, so a new id is refused (COORDINATOR_NOT_AVAILABLE,
// which clients retry) until one of them ends.
func TestCoordinatorBudgetRefusesWhenNoneIdle(t *testing.T) {
	const limit = 10
	h := newHarness(t, func(o *Options) { o.MaxIDs = limit })
	ids := make([]Result, limit)
	for i := range ids {
		id := fmt.Sprintf("busy-%d", i)
		ids[i] = h.init(id, 600000)
		mustOK(t, "init "+id, ids[i])
		mustOK(t, "add "+id, h.add(id, ids[i].ProducerID, ids[i].ProducerEpoch, t0))
	}
	if r := h.init("new", 60000); !errors.Is(r.Err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("a new id over a budget of open transactions: %v", r.Err)
	}
	mustOK(t, "commit busy-3", h.end("busy-3", ids[3].ProducerID, ids[3].ProducerEpoch, true))
	mustOK(t, "init new after a commit", h.init("new", 60000))
	testwait.For(t, "busy-3 expired", testwait.Default, func() bool {
		_, err := h.describe("busy-3")
		return errors.Is(err, kerr.TransactionalIDNotFound)
	})
	for i := range ids {
		if i == 3 {
			continue
		}
		if tx, err := h.describe(fmt.Sprintf("busy-%d", i)); err != nil || tx.State != StateOngoing {
			t.Fatalf("busy-%d: %+v %v", i, tx, err)
		}
	}
}
