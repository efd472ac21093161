package partition

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/interop/testwait"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// fakeCluster is a scripted stand-in for raft: a leader's proposals are
// encoded into a log; a "FSM" goroutine decodes each entry and hands it to
// every node's applier with ApplyAsync, waits for all of them, and passes
// the proposing node's result to a "completer" goroutine, which calls the
// proposal's done. So done always runs after Propose returned, on another
// goroutine, as with raft.
type fakeCluster struct {
	t     *testing.T
	nodes []*fakeNode

	mu   sync.Mutex
	cond *sync.Cond
	log  []fakeEntry
	// held: committed entries wait (proposals stay in flight).
	held bool
	// failWith: entries are not applied; their proposals fail with it.
	failWith error
	stopped  bool
	// results[i][n] is node n's result for entry i.
	results [][]any
	// term is the raft term entries are proposed in (0: none, as on a
	// single node); the FSM hands it to Termed commands.
	term uint64

	completions chan func()
	// cb answers refusals off the proposer's goroutine (the contract).
	cb replication.Callbacks
	// completed counts the proposers' done callbacks that have returned
	// (run by the completer goroutine, in entry order).
	completed int
	wg        sync.WaitGroup
}

type fakeEntry struct {
	key, kind string
	payload   []byte
	term      uint64
	from      int
	done      func(any, error)
}

// fakeNode is one node's replicator.
type fakeNode struct {
	c      *fakeCluster
	id     int
	leader bool

	mu       sync.Mutex
	appliers map[string]cluster.Applier
	// ever keeps every applier registered, for tests that outlive
	// Unregister.
	ever map[string]cluster.Applier
}

func newFakeCluster(t *testing.T, nodes int) *fakeCluster {
	c := &fakeCluster{t: t, completions: make(chan func(), 4096)}
	c.cond = sync.NewCond(&c.mu)
	for i := range nodes {
		c.nodes = append(c.nodes, &fakeNode{c: c, id: i, leader: i == 0, appliers: map[string]cluster.Applier{}, ever: map[string]cluster.Applier{}})
	}
	c.wg.Add(2)
	go c.fsm()
	go c.completer()
	t.Cleanup(c.stop)
	return c
}

func (c *fakeCluster) stop() {
	c.mu.Lock()
	c.stopped = true
	c.cond.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *fakeCluster) hold(h bool) {
	c.mu.Lock()
	c.held = h
	c.cond.Broadcast()
	c.mu.Unlock()
}

// answered is how many proposals' done callbacks have returned.
func (c *fakeCluster) answered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.completed
}

// applied is how many entries the FSM finished.
func (c *fakeCluster) applied() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.results)
}

func (c *fakeCluster) fsm() {
	defer c.wg.Done()
	defer close(c.completions)
	for {
		c.mu.Lock()
		for !c.stopped && (c.held || len(c.log) == 0) {
			c.cond.Wait()
		}
		if c.stopped {
			c.mu.Unlock()
			return
		}
		e := c.log[0]
		c.log = c.log[1:]
		failWith := c.failWith
		c.mu.Unlock()
		if failWith != nil {
			c.completions <- func() { e.done(nil, failWith) }
			continue
		}
		res := make([]any, len(c.nodes))
		var wg sync.WaitGroup
		for i, n := range c.nodes {
			// Each node decodes its own copy, as each reads its own log.
			cmd, err := cluster.DecodeCommand(e.kind, bytes.Clone(e.payload))
			if err != nil {
				res[i] = err
				continue
			}
			if t, ok := cmd.(replication.Termed); ok {
				t.SetTerm(e.term)
			}
			aa, ok := n.applier(e.key).(cluster.AsyncApplier)
			if !ok {
				res[i] = fmt.Errorf("no async applier for %q on node %d", e.key, n.id)
				continue
			}
			wg.Add(1)
			aa.ApplyAsync(cmd, func(v any) {
				res[i] = v
				wg.Done()
			})
		}
		wg.Wait()
		c.mu.Lock()
		c.results = append(c.results, res)
		c.mu.Unlock()
		c.completions <- func() { e.done(res[e.from], nil) }
	}
}

func (c *fakeCluster) completer() {
	defer c.wg.Done()
	for f := range c.completions {
		f()
		c.mu.Lock()
		c.completed++
		c.mu.Unlock()
	}
}

func (n *fakeNode) Register(key string, a cluster.Applier) {
	n.mu.Lock()
	n.appliers[key], n.ever[key] = a, a
	n.mu.Unlock()
}

func (n *fakeNode) Unregister(key string) {
	n.mu.Lock()
	delete(n.appliers, key)
	n.mu.Unlock()
}

func (n *fakeNode) applier(key string) cluster.Applier {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.appliers[key]
}

func (n *fakeNode) registered(key string) cluster.AsyncApplier {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ever[key].(cluster.AsyncApplier)
}

func (n *fakeNode) Propose(key string, cmd cluster.Command, done func(any, error)) {
	if !n.leader {
		n.c.cb.Add(done, nil, fmt.Errorf("%w: node %d follows", cluster.ErrNotLeader, n.id))
		return
	}
	kind, payload, err := cluster.EncodeCommand(cmd)
	if err != nil {
		n.c.cb.Add(done, nil, err)
		return
	}
	n.c.mu.Lock()
	n.c.log = append(n.c.log, fakeEntry{key: key, kind: kind, payload: payload, term: n.c.term, from: n.id, done: done})
	n.c.cond.Broadcast()
	n.c.mu.Unlock()
}

// Harness.

func quietSystem(t *testing.T) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	return sys
}

// openWith opens partition orders-0 on repl and closes it at cleanup.
func openWith(t *testing.T, sys *actor.ActorSystem, repl cluster.Replicator) *Partition {
	t.Helper()
	p, err := Open(sys.Root, Options{Dir: t.TempDir(), Topic: "orders", Config: defaultConfig(t), Repl: repl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(false) })
	return p
}

const testKey = "partition/orders/0"

func await[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		panic("unreachable")
	}
}

func produceSync(t *testing.T, p *Partition, records []byte) ProduceResult {
	t.Helper()
	ch := make(chan ProduceResult, 1)
	p.Produce(records, -1, func(r ProduceResult) { ch <- r })
	return await(t, ch)
}

func markerSync(t *testing.T, p *Partition, pid int64, epoch int16, commit bool) error {
	t.Helper()
	ch := make(chan error, 1)
	p.WriteTxnMarker(pid, epoch, commit, 3, func(err error) { ch <- err })
	return await(t, ch)
}

type lowErr struct {
	low int64
	err error
}

func deleteSync(t *testing.T, p *Partition, off int64) (int64, error) {
	t.Helper()
	ch := make(chan lowErr, 1)
	p.DeleteRecords(off, func(low int64, err error) { ch <- lowErr{low, err} })
	r := await(t, ch)
	return r.low, r.err
}

// produceAll sends every record set without waiting and returns the
// replies in the order they came.
func produceAll(t *testing.T, p *Partition, sets [][]byte) []ProduceResult {
	t.Helper()
	type reply struct {
		i   int
		res ProduceResult
	}
	ch := make(chan reply, len(sets))
	for i, recs := range sets {
		p.Produce(recs, -1, func(r ProduceResult) { ch <- reply{i, r} })
	}
	out := make([]ProduceResult, len(sets))
	for n := range sets {
		r := await(t, ch)
		if r.i != n {
			t.Fatalf("reply %d is for produce %d: replies out of order", n, r.i)
		}
		out[r.i] = r.res
	}
	return out
}

// TestAsyncProducesInFlight: many produces in flight at once complete in
// order with consecutive offsets; nothing is visible before it is applied;
// the follower applies the same commands to the same results.
func TestAsyncProducesInFlight(t *testing.T) {
	c := newFakeCluster(t, 2)
	sys := quietSystem(t)
	leader, follower := openWith(t, sys, c.nodes[0]), openWith(t, sys, c.nodes[1])

	c.hold(true)
	const n = 200
	sets := make([][]byte, n)
	for i := range sets {
		sets[i] = batch(t, -1, -1, -1, 2, false)
	}
	type reply struct {
		i   int
		res ProduceResult
	}
	ch := make(chan reply, n)
	for i, recs := range sets {
		leader.Produce(recs, -1, func(r ProduceResult) { ch <- reply{i, r} })
	}
	leader.Producers() // the actor took every produce
	if hw := leader.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before anything committed", hw)
	}
	select {
	case r := <-ch:
		t.Fatalf("reply before commit: %+v", r)
	default:
	}
	c.hold(false)
	for k := range n {
		r := await(t, ch)
		if r.i != k {
			t.Fatalf("reply %d is for produce %d", k, r.i)
		}
		if r.res.Err != nil || r.res.BaseOffset != int64(2*k) || r.res.LogStartOffset != 0 || r.res.LogAppendTime != -1 {
			t.Fatalf("produce %d: %+v", k, r.res)
		}
	}
	if hw := leader.HighWatermark(); hw != 2*n {
		t.Fatalf("leader high watermark %d, want %d", hw, 2*n)
	}
	if hw := follower.HighWatermark(); hw != 2*n {
		t.Fatalf("follower high watermark %d, want %d", hw, 2*n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, res := range c.results {
		if !reflect.DeepEqual(res[0], res[1]) {
			t.Fatalf("entry %d: leader %+v, follower %+v", i, res[0], res[1])
		}
	}
	lb, err := leader.Read(0, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := follower.Read(0, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lb, fb) {
		t.Fatal("leader and follower logs differ")
	}
}

// TestAsyncLargeProducesReadBack: records large enough for applyBufs (the
// pooled copies of replicated records) reach both nodes' logs intact while
// many are in flight and the buffers are recycled between applies.
func TestAsyncLargeProducesReadBack(t *testing.T) {
	c := newFakeCluster(t, 2)
	sys := quietSystem(t)
	leader, follower := openWith(t, sys, c.nodes[0]), openWith(t, sys, c.nodes[1])
	const n = 64
	var want []string
	ch := make(chan ProduceResult, n)
	for i := range n {
		value := strings.Repeat(string(rune('a'+i%26)), 20<<10+i*512)
		want = append(want, value, value)
		leader.Produce(valueBatch(t, -1, -1, -1, 2, false, value), -1, func(r ProduceResult) { ch <- r })
	}
	for range n {
		if r := await(t, ch); r.Err != nil {
			t.Fatalf("produce: %+v", r)
		}
	}
	for name, p := range map[string]*Partition{"leader": leader, "follower": follower} {
		b, err := p.Read(0, 64<<20, false)
		if err != nil {
			t.Fatal(err)
		}
		got, next := consume(t, b, nil, 0)
		if next != 2*n || !slices.Equal(got, want) {
			t.Fatalf("%s: read %d records up to %d, want %d intact", name, len(got), next, len(want))
		}
	}
}

// freeNode is a fake node that promises replication.FreeAtDone, as raft's
// replicator does.
type freeNode struct{ *fakeNode }

func (freeNode) CommandFreeAtDone() {}

// TestRecordsFreeOnlyFromDone: with a replicator that stops reading a
// command before its done, a produce answered from done frees its records;
// one answered before done (the partition closed with it in flight) does
// not, since the replicator may still be reading them.
func TestRecordsFreeOnlyFromDone(t *testing.T) {
	c := newFakeCluster(t, 1)
	sys := quietSystem(t)
	p, err := Open(sys.Root, Options{Dir: t.TempDir(), Topic: "orders", Config: defaultConfig(t), Repl: freeNode{c.nodes[0]}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if r := produceSync(t, p, batch(t, -1, -1, -1, 2, false)); r.Err != nil || !r.RecordsFree {
		t.Fatalf("answered from done: %+v, want success with records free", r)
	}
	c.hold(true)
	got := make(chan ProduceResult, 1)
	p.Produce(batch(t, -1, -1, -1, 1, false), -1, func(r ProduceResult) { got <- r })
	p.Producers() // the actor proposed it
	if err := p.Close(false); err != nil {
		t.Fatal(err)
	}
	if r := await(t, got); r.Err != kerr.NotLeaderForPartition || r.RecordsFree {
		t.Fatalf("answered at close, in flight: %+v, want NOT_LEADER with records not free", r)
	}
}

// idempotenceScript is one producer's life: appends, duplicates, gaps,
// an unknown producer, an epoch bump and a fenced epoch.
func idempotenceScript(t *testing.T) [][]byte {
	return [][]byte{
		batch(t, 7, 0, 0, 2, false),    // 0-1
		batch(t, 7, 0, 2, 3, false),    // 2-4
		batch(t, 7, 0, 0, 2, false),    // duplicate: 0
		batch(t, 7, 0, 2, 3, false),    // duplicate: 2
		batch(t, 7, 0, 9, 1, false),    // gap: out of order
		batch(t, 7, 0, 5, 1, false),    // 5
		batch(t, 8, 0, 3, 1, false),    // unknown producer mid-sequence: 6 (KIP-360)
		batch(t, 7, 1, 0, 1, false),    // bumped epoch: 7
		batch(t, 7, 0, 6, 1, false),    // fenced epoch
		batch(t, -1, -1, -1, 4, false), // 8-11
		batch(t, 7, 1, 0, 1, false),    // duplicate on the new epoch: 7
	}
}

// TestAsyncIdempotenceMatchesLocal: the same script, all in flight, gets
// the same answers through the asynchronous replicator as through Local.
func TestAsyncIdempotenceMatchesLocal(t *testing.T) {
	sys := quietSystem(t)
	local := produceAll(t, openWith(t, sys, cluster.NewLocal()), idempotenceScript(t))
	c := newFakeCluster(t, 2)
	leader := openWith(t, sys, c.nodes[0])
	openWith(t, sys, c.nodes[1])
	c.hold(true)
	done := make(chan []ProduceResult, 1)
	go func() { done <- produceAll(t, leader, idempotenceScript(t)) }()
	leader.Producers()
	c.hold(false)
	async := await(t, done)

	wantBase := []int64{0, 2, 0, 2, -1, 5, 6, 7, -1, 8, 7}
	wantErr := []error{nil, nil, nil, nil, kerr.OutOfOrderSequenceNumber, nil, nil, nil, kerr.InvalidProducerEpoch, nil, nil}
	for i := range local {
		// Local is done with the records when it answers; this fake
		// asynchronous replicator does not promise it (RecordsFree).
		if !local[i].RecordsFree || async[i].RecordsFree {
			t.Errorf("produce %d: records free: local %v (want true), async %v (want false)", i, local[i].RecordsFree, async[i].RecordsFree)
		}
		local[i].RecordsFree, async[i].RecordsFree = false, false
		if !reflect.DeepEqual(local[i], async[i]) {
			t.Errorf("produce %d: local %+v, async %+v", i, local[i], async[i])
		}
		if local[i].BaseOffset != wantBase[i] || local[i].Err != wantErr[i] {
			t.Errorf("produce %d: %+v, want base %d err %v", i, local[i], wantBase[i], wantErr[i])
		}
	}
}

// txnScenario writes transactions and markers; it returns what it saw.
func txnScenario(t *testing.T, p *Partition) []string {
	var out []string
	note := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	r := produceSync(t, p, txnBatch(t, 10, 0, 0, 3)) // 0-2, open
	note("txn 10: %d %v lso %d", r.BaseOffset, r.Err, p.LastStableOffset())
	r = produceSync(t, p, batch(t, -1, -1, -1, 2, false)) // 3-4
	note("plain: %d %v lso %d", r.BaseOffset, r.Err, p.LastStableOffset())
	note("commit 10: %v hw %d lso %d", markerSync(t, p, 10, 0, true), p.HighWatermark(), p.LastStableOffset()) // marker 5
	r = produceSync(t, p, txnBatch(t, 11, 0, 0, 2))                                                            // 6-7
	note("txn 11: %d %v lso %d", r.BaseOffset, r.Err, p.LastStableOffset())
	note("abort 11: %v hw %d lso %d aborted %v", markerSync(t, p, 11, 0, false), p.HighWatermark(), p.LastStableOffset(), p.AbortedTransactions(0, p.HighWatermark())) // marker 8
	note("nothing open 12: %v hw %d", markerSync(t, p, 12, 0, true), p.HighWatermark())
	r = produceSync(t, p, txnBatch(t, 10, 1, 0, 1)) // 9, bumped epoch
	note("txn 10 epoch 1: %d %v", r.BaseOffset, r.Err)
	err := markerSync(t, p, 10, 0, true)
	note("fenced marker: %v", errors.Is(err, kerr.InvalidProducerEpoch))
	note("commit 10 epoch 1: %v hw %d lso %d", markerSync(t, p, 10, 1, true), p.HighWatermark(), p.LastStableOffset()) // marker 10
	return out
}

// TestAsyncMarkersMatchLocal: transaction markers through the asynchronous
// replicator answer as through Local, and the follower ends in the same
// transactional state.
func TestAsyncMarkersMatchLocal(t *testing.T) {
	sys := quietSystem(t)
	local := txnScenario(t, openWith(t, sys, cluster.NewLocal()))
	c := newFakeCluster(t, 2)
	leader, follower := openWith(t, sys, c.nodes[0]), openWith(t, sys, c.nodes[1])
	async := txnScenario(t, leader)
	want := []string{
		"txn 10: 0 <nil> lso 0",
		"plain: 3 <nil> lso 0",
		"commit 10: <nil> hw 6 lso 6",
		"txn 11: 6 <nil> lso 6",
		"abort 11: <nil> hw 9 lso 9 aborted [{11 6 8}]",
		"nothing open 12: <nil> hw 9",
		"txn 10 epoch 1: 9 <nil>",
		"fenced marker: true",
		"commit 10 epoch 1: <nil> hw 11 lso 11",
	}
	if !reflect.DeepEqual(local, want) {
		t.Errorf("local:\n%q\nwant\n%q", local, want)
	}
	if !reflect.DeepEqual(async, want) {
		t.Errorf("async:\n%q\nwant\n%q", async, want)
	}
	if follower.HighWatermark() != leader.HighWatermark() || follower.LastStableOffset() != leader.LastStableOffset() ||
		!reflect.DeepEqual(follower.AbortedTransactions(0, 100), leader.AbortedTransactions(0, 100)) ||
		!reflect.DeepEqual(follower.Producers(), leader.Producers()) {
		t.Fatalf("follower differs: hw %d lso %d aborted %v producers %+v; leader hw %d lso %d aborted %v producers %+v",
			follower.HighWatermark(), follower.LastStableOffset(), follower.AbortedTransactions(0, 100), follower.Producers(),
			leader.HighWatermark(), leader.LastStableOffset(), leader.AbortedTransactions(0, 100), leader.Producers())
	}
}

// deleteScenario moves the log start around; it returns what it saw.
func deleteScenario(t *testing.T, p *Partition) []string {
	var out []string
	note := func(off int64) {
		low, err := deleteSync(t, p, off)
		out = append(out, fmt.Sprintf("delete %d: %d %v start %d", off, low, err, p.LogStartOffset()))
	}
	if r := produceSync(t, p, batch(t, -1, -1, -1, 10, false)); r.Err != nil {
		t.Fatal(r.Err)
	}
	note(4)
	note(11) // past the high watermark
	note(2)  // behind the log start: nothing moves
	note(-1) // the high watermark
	return out
}

// TestAsyncDeleteRecordsMatchesLocal: DeleteRecords is replicated; the
// follower's log start moves too, and Apply re-checks the offset.
func TestAsyncDeleteRecordsMatchesLocal(t *testing.T) {
	sys := quietSystem(t)
	local := deleteScenario(t, openWith(t, sys, cluster.NewLocal()))
	c := newFakeCluster(t, 2)
	leader, follower := openWith(t, sys, c.nodes[0]), openWith(t, sys, c.nodes[1])
	async := deleteScenario(t, leader)
	want := []string{
		"delete 4: 4 <nil> start 4",
		"delete 11: -1 OFFSET_OUT_OF_RANGE: The requested offset is not within the range of offsets maintained by the server. start 4",
		"delete 2: 4 <nil> start 4",
		"delete -1: 10 <nil> start 10",
	}
	if !reflect.DeepEqual(local, want) {
		t.Errorf("local:\n%q\nwant\n%q", local, want)
	}
	if !reflect.DeepEqual(async, want) {
		t.Errorf("async:\n%q\nwant\n%q", async, want)
	}
	if s := follower.LogStartOffset(); s != 10 {
		t.Fatalf("follower log start %d, want 10", s)
	}

	// A command past the log end (a proposer that was wrong about its
	// high watermark) is refused when applied, on every node alike.
	ch := make(chan any, 1)
	c.nodes[1].registered(testKey).ApplyAsync(&deleteRecordsCmd{offset: 50}, func(v any) { ch <- v })
	if r := await(t, ch); !reflect.DeepEqual(r, deleteRecordsResult{lowWatermark: -1, err: kerr.OffsetOutOfRange}) {
		t.Fatalf("delete past the log end: %+v", r)
	}
}

// TestProposeErrors: a follower refuses proposals at once; a leader that
// loses leadership fails them later; both answer NOT_LEADER_OR_FOLLOWER.
func TestProposeErrors(t *testing.T) {
	c := newFakeCluster(t, 2)
	sys := quietSystem(t)
	leader, follower := openWith(t, sys, c.nodes[0]), openWith(t, sys, c.nodes[1])

	check := func(name string, p *Partition, wantNotLeader bool) {
		t.Helper()
		r := produceSync(t, p, batch(t, -1, -1, -1, 1, false))
		if r.Err != kerr.NotLeaderForPartition || r.BaseOffset != -1 {
			t.Fatalf("%s: produce %+v", name, r)
		}
		merr := markerSync(t, p, 1, 0, true)
		_, derr := deleteSync(t, p, -1)
		for _, err := range []error{merr, derr} {
			if !errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, cluster.ErrNotLeader) != wantNotLeader {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	check("follower", follower, true)

	c.mu.Lock()
	c.failWith = fmt.Errorf("%w: leadership lost", cluster.ErrNotLeader)
	c.mu.Unlock()
	check("lost leadership", leader, true)

	unknown := fmt.Errorf("raft is shutting down: %w", cluster.ErrOutcomeUnknown)
	c.mu.Lock()
	c.failWith = unknown
	c.mu.Unlock()
	check("unknown outcome", leader, false)
	r := produceSync(t, leader, batch(t, -1, -1, -1, 1, false))
	if r.ErrMessage != unknown.Error() {
		t.Fatalf("message %q", r.ErrMessage)
	}
}

// TestApplyAsyncClosed: a closed partition still answers ApplyAsync, so
// the FSM never hangs; proposals in flight at close are answered once.
func TestApplyAsyncClosed(t *testing.T) {
	c := newFakeCluster(t, 1)
	sys := quietSystem(t)
	p, err := Open(sys.Root, Options{Dir: t.TempDir(), Topic: "orders", Config: defaultConfig(t), Repl: c.nodes[0], Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	aa := c.nodes[0].registered(testKey)

	c.hold(true)
	var mu sync.Mutex
	replies := map[int]int{}
	got := make(chan ProduceResult, 10)
	for i := range 3 {
		p.Produce(batch(t, -1, -1, -1, 1, false), -1, func(r ProduceResult) {
			mu.Lock()
			replies[i]++
			mu.Unlock()
			got <- r
		})
	}
	markerErr := make(chan error, 1)
	p.WriteTxnMarker(1, 0, true, 0, func(err error) { markerErr <- err })
	p.Producers()
	// Handed over before Close: still applied.
	queued := make(chan any, 1)
	aa.ApplyAsync(&appendCmd{records: batch(t, -1, -1, -1, 1, false), now: time.Now().UnixNano()}, func(v any) { queued <- v })
	if err := p.Close(false); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r := await(t, got); r.Err != kerr.NotLeaderForPartition {
			t.Fatalf("in flight at close: %+v", r)
		}
	}
	if err := await(t, markerErr); !errors.Is(err, kerr.NotLeaderForPartition) || !errors.Is(err, cluster.ErrOutcomeUnknown) {
		t.Fatalf("marker in flight at close: %v, want NOT_LEADER_OR_FOLLOWER and an unknown outcome", err)
	}
	if r, ok := await(t, queued).(ProduceResult); !ok || r.Err != nil || r.BaseOffset != 0 {
		t.Fatalf("apply queued before close: %+v", r)
	}

	after := make(chan any, 1)
	aa.ApplyAsync(&appendCmd{records: batch(t, -1, -1, -1, 1, false)}, func(v any) { after <- v })
	if v := await(t, after); v != kerr.NotLeaderForPartition {
		t.Fatalf("apply after close: %+v", v)
	}

	// The held entries now reach the FSM (the applier is gone) and their
	// late answers are dropped: no second reply.
	c.hold(false)
	// Once the four proposers' done callbacks have returned, any second
	// reply has been made: done either replies itself or hands the answer
	// to the closed actor's gate, which drops it.
	testwait.For(t, "the four held entries to be answered", testwait.Default, func() bool { return c.answered() >= 4 })
	mu.Lock()
	defer mu.Unlock()
	for i := range 3 {
		if replies[i] != 1 {
			t.Fatalf("produce %d answered %d times", i, replies[i])
		}
	}
}

// TestApplyPanicAnswers: a command Apply cannot handle is answered with an
// error instead of leaving the FSM waiting.
func TestApplyPanicAnswers(t *testing.T) {
	c := newFakeCluster(t, 1)
	openWith(t, quietSystem(t), c.nodes[0])
	ch := make(chan any, 1)
	c.nodes[0].registered(testKey).ApplyAsync(struct{}{}, func(v any) { ch <- v })
	if err, ok := await(t, ch).(error); !ok || !errors.Is(err, kerr.UnknownServerError) {
		t.Fatalf("unknown command: %v", err)
	}
}

// TestCommandRoundTrip: every command kind decodes to what was encoded.
func TestCommandRoundTrip(t *testing.T) {
	cmds := []cluster.Command{
		&appendCmd{records: batch(t, 7, 2, 40, 3, true), now: time.Now().UnixNano()},
		&appendCmd{records: []byte{}, now: -1},
		&appendCmd{records: batch(t, -1, -1, -1, 1, false), now: 5, checked: true},
		&markerCmd{pid: 1 << 40, epoch: -3, commit: true, coordinatorEpoch: 1<<31 - 1, now: 1_700_000_000_123_456_789},
		&markerCmd{pid: -1, epoch: 32767, commit: false, coordinatorEpoch: -5, now: 0},
		&deleteRecordsCmd{offset: 1<<62 + 5},
		&deleteRecordsCmd{offset: 0},
		&compactCmd{dirtyStart: 1 << 33, end: 1<<33 + 9, now: 1_700_000_000_123_456_789, deleteRetentionMs: 86_400_000},
		&compactCmd{},
	}
	kinds := []string{kindAppend, kindAppend, kindAppend, kindMarker, kindMarker, kindDeleteRecords, kindDeleteRecords, kindCompact, kindCompact}
	for i, cmd := range cmds {
		kind, payload, err := cluster.EncodeCommand(cmd)
		if err != nil || kind != kinds[i] {
			t.Fatalf("encode %T: %q %v", cmd, kind, err)
		}
		got, err := cluster.DecodeCommand(kind, payload)
		if err != nil {
			t.Fatalf("decode %T: %v", cmd, err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("round trip: %+v, want %+v", got, cmd)
		}
		_, again, _ := cluster.EncodeCommand(got)
		if !bytes.Equal(again, payload) {
			t.Fatalf("re-encoding %T differs", cmd)
		}
	}

	bad := []struct {
		kind, name string
		payload    []byte
	}{
		{kindAppend, "empty", nil},
		{kindAppend, "short", []byte{commandVersion, 1, 2}},
		{kindAppend, "version", append([]byte{appendCheckedVersion + 1}, make([]byte, 8)...)},
		{kindAppend, "short checked", []byte{appendCheckedVersion, 1, 2}},
		{kindMarker, "short", (&markerCmd{}).AppendCommand(nil)[:10]},
		{kindMarker, "trailing", append((&markerCmd{}).AppendCommand(nil), 0)},
		{kindMarker, "commit flag", func() []byte { b := (&markerCmd{}).AppendCommand(nil); b[11] = 2; return b }()},
		{kindDeleteRecords, "trailing", append((&deleteRecordsCmd{}).AppendCommand(nil), 0)},
		{kindCompact, "short", (&compactCmd{}).AppendCommand(nil)[:20]},
		{kindCompact, "trailing", append((&compactCmd{}).AppendCommand(nil), 0)},
		{kindCompact, "end below start", (&compactCmd{dirtyStart: 5, end: 4}).AppendCommand(nil)},
		{kindCompact, "negative start", (&compactCmd{dirtyStart: -1, end: 4}).AppendCommand(nil)},
	}
	for _, b := range bad {
		if _, err := cluster.DecodeCommand(b.kind, b.payload); err == nil {
			t.Errorf("%s %s: decoded", b.kind, b.name)
		}
	}
}

// TestApplyAsyncDuringClose: a command handed over while Close is queued
// behind other work is still answered (the actor drains its mailbox).
func TestApplyAsyncDuringClose(t *testing.T) {
	c := newFakeCluster(t, 1)
	sys := quietSystem(t)
	p, err := Open(sys.Root, Options{Dir: t.TempDir(), Topic: "orders", Config: defaultConfig(t), Repl: c.nodes[0], Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	aa := c.nodes[0].registered(testKey)
	// The reply runs on the actor goroutine: blocking it holds the actor
	// while Close and then ApplyAsync queue up behind it.
	unblock, replied := make(chan struct{}), make(chan struct{})
	p.Produce(batch(t, -1, -1, -1, 1, false), -1, func(ProduceResult) { close(replied); <-unblock })
	await(t, replied)
	// Close's first step, its message, is queued here on the test's
	// goroutine, so it is in the mailbox before ApplyAsync's: no guessing
	// how long a goroutine calling Close takes to get there.
	closed := make(chan error, 1)
	p.root.Send(p.pid, &closeMsg{done: closed})
	answer := make(chan any, 1)
	aa.ApplyAsync(&appendCmd{records: batch(t, -1, -1, -1, 1, false)}, func(v any) { answer <- v })
	close(unblock)
	if err := await(t, closed); err != nil {
		t.Fatal(err)
	}
	if v := await(t, answer); v != kerr.NotLeaderForPartition {
		t.Fatalf("apply queued behind close: %+v, want NOT_LEADER_FOR_PARTITION", v)
	}
	// The rest of Close: stop the actor once it drained its mailbox.
	p.root.Poison(p.pid)
	p.wakeWaiters()
}

// oddRepl applies nothing and answers every proposal, off the proposer's
// goroutine, with a result of the wrong type.
type oddRepl struct{ cb replication.Callbacks }

func (*oddRepl) Register(string, replication.Applier) {}
func (*oddRepl) Unregister(string)                    {}
func (r *oddRepl) Propose(_ string, _ replication.Command, done func(any, error)) {
	r.cb.Add(done, "not a result", nil)
}

// TestWrongResultType: a result of the wrong type is a broken invariant
// answered UNKNOWN_SERVER_ERROR, not a panic on the callback goroutine.
func TestWrongResultType(t *testing.T) {
	p := openWith(t, quietSystem(t), &oddRepl{})
	if r := produceSync(t, p, batch(t, -1, -1, -1, 1, false)); r.Err != kerr.UnknownServerError {
		t.Fatalf("produce: %+v", r)
	}
	if err := markerSync(t, p, 1, 0, true); !errors.Is(err, kerr.UnknownServerError) {
		t.Fatalf("marker: %v", err)
	}
}

// TestApplyLeavesReplicatedRecordsAlone: a decoded append aliases the raft
// entry (replication may still be sending it), so applying it, with or
// without LogAppendTime, writes to none of the entry's bytes, while the
// log gets the batches with their offsets, leader epoch and append time.
func TestApplyLeavesReplicatedRecordsAlone(t *testing.T) {
	for _, logAppendTime := range []bool{false, true} {
		cfg := defaultConfig(t)
		cfg.LogAppendTime = logAppendTime
		lg := &memLog{}
		sl, err := openStateLog(lg, cfg, 3, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			records := append(batch(t, 9, 0, int32(2*k), 2, true), batch(t, -1, 0, 0, 1, true)...)
			_, payload, err := cluster.EncodeCommand(&appendCmd{records: records, now: int64(5000+k) * 1e6})
			if err != nil {
				t.Fatal(err)
			}
			entry := bytes.Clone(payload)
			cmd, err := cluster.DecodeCommand(kindAppend, payload)
			if err != nil {
				t.Fatal(err)
			}
			res := sl.produce(cmd.(*appendCmd).records, int64(5000+k))
			if res.Err != nil || res.BaseOffset != int64(3*k) {
				t.Fatalf("append time %v, produce %d: base %d err %v", logAppendTime, k, res.BaseOffset, res.Err)
			}
			if !bytes.Equal(payload, entry) {
				t.Fatalf("append time %v, produce %d: applying wrote to the raft entry", logAppendTime, k)
			}
		}
		for i, b := range lg.batches {
			h, err := recordbatch.Validate(b)
			if err != nil {
				t.Fatalf("stored batch %d: %v", i, err)
			}
			wantBase := int64(i/2*3 + i%2*2)
			if h.BaseOffset != wantBase || h.PartitionLeaderEpoch != 3 {
				t.Fatalf("stored batch %d: base %d epoch %d, want %d and 3", i, h.BaseOffset, h.PartitionLeaderEpoch, wantBase)
			}
			if got := h.TimestampType() == 1; got != logAppendTime || (logAppendTime && h.MaxTimestamp != int64(5000+i/2)) {
				t.Fatalf("stored batch %d: LogAppendTime %v max timestamp %d", i, got, h.MaxTimestamp)
			}
		}
	}
}

// TestRefusedProduceIsNotReplicated: records that fail the produce checks
// are answered by the proposer without a round of replication; the
// produce that passes is replicated marked checked, and every node
// applies it alike.
func TestRefusedProduceIsNotReplicated(t *testing.T) {
	c := newFakeCluster(t, 2)
	sys := quietSystem(t)
	leader, follower := openWith(t, sys, c.nodes[0]), openWith(t, sys, c.nodes[1])
	c.hold(true) // proposals stay in the log, to be looked at
	entries := func() []fakeEntry {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.Clone(c.log)
	}

	bad := batch(t, -1, -1, -1, 2, false)
	bad[len(bad)-1] ^= 0xff // records changed under the CRC
	if res := produceSync(t, leader, bad); !errors.Is(res.Err, kerr.CorruptMessage) || !res.RecordsFree || res.BaseOffset != -1 {
		t.Fatalf("corrupt batch: %+v", res)
	}
	if n := len(entries()); n != 0 {
		t.Fatalf("a refused produce was proposed: %d entries", n)
	}

	ch := make(chan ProduceResult, 1)
	leader.Produce(batch(t, -1, -1, -1, 2, false), -1, func(r ProduceResult) { ch <- r })
	testwait.For(t, "the good produce is proposed", 10*time.Second, func() bool { return len(entries()) == 1 })
	e := entries()[0]
	cmd, err := cluster.DecodeCommand(e.kind, e.payload)
	if err != nil || !cmd.(*appendCmd).checked {
		t.Fatalf("proposed produce: %+v %v, want checked", cmd, err)
	}
	c.hold(false)
	if res := await(t, ch); res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("good batch: %+v", res)
	}
	testwait.For(t, "the follower applies the produce", 10*time.Second, func() bool { return follower.HighWatermark() == 2 })
	if hw := leader.HighWatermark(); hw != 2 {
		t.Fatalf("leader's high watermark %d, want 2", hw)
	}
}

// TestUncheckedAppendsUntilEveryNodeReadsThem: while the cluster's
// finalized levels do not allow checked appends (a node of an earlier
// version could not read them), a produce is replicated as before and
// every node checks it at apply: a corrupt batch is refused there, alike.
func TestUncheckedAppendsUntilEveryNodeReadsThem(t *testing.T) {
	SetCheckedAppends(func() bool { return false })
	t.Cleanup(func() { SetCheckedAppends(nil) })
	c := newFakeCluster(t, 2)
	sys := quietSystem(t)
	leader, follower := openWith(t, sys, c.nodes[0]), openWith(t, sys, c.nodes[1])

	bad := batch(t, -1, -1, -1, 2, false)
	bad[len(bad)-1] ^= 0xff
	if res := produceSync(t, leader, bad); !errors.Is(res.Err, kerr.CorruptMessage) {
		t.Fatalf("corrupt batch: %+v", res)
	}
	if res := produceSync(t, leader, batch(t, -1, -1, -1, 2, false)); res.Err != nil || res.BaseOffset != 0 {
		t.Fatalf("good batch: %+v", res)
	}
	c.mu.Lock()
	results := slices.Clone(c.results)
	c.mu.Unlock()
	if len(results) != 2 {
		t.Fatalf("%d entries applied, want both produces", len(results))
	}
	for n := range c.nodes {
		if res := results[0][n].(ProduceResult); !errors.Is(res.Err, kerr.CorruptMessage) {
			t.Fatalf("node %d applied the corrupt batch: %+v", n, res)
		}
	}
	testwait.For(t, "the follower applies the produce", 10*time.Second, func() bool { return follower.HighWatermark() == 2 })
}
