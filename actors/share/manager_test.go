package share

import (
	"encoding/binary"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/interop/testwait"
)

// fakeLog is a scripted partition log of record batches (headers and a
// filler body; the share-partition reads only the headers).
type fakeLog struct {
	mu struct {
		sync.Mutex
		batches [][]byte
		start   int64
		next    int64
		lso     int64 // -1: the high watermark
		aborted []AbortedTxn
		// byTime answers OffsetForTimestamp: the first offset at or
		// after each timestamp (unix ms), ascending.
		byTime []struct{ ts, off int64 }
	}
}

func newFakeLog() *fakeLog {
	l := &fakeLog{}
	l.mu.lso = -1
	return l
}

// append adds a batch of n records and returns its base offset.
func (l *fakeLog) append(n int, control, txn bool, producerID int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := make([]byte, batchHeaderLen+8)
	base := l.mu.next
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-batchLengthExtra))
	b[offMagic] = 2
	var attrs uint16
	if control {
		attrs |= attrControl
	}
	if txn {
		attrs |= attrTransaction
	}
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint32(b[offLastDelta:], uint32(n-1))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	l.mu.batches = append(l.mu.batches, b)
	l.mu.next += int64(n)
	return base
}

func (l *fakeLog) Read(offset int64, maxBytes int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []byte
	for _, b := range l.mu.batches {
		base := int64(binary.BigEndian.Uint64(b))
		last := base + int64(binary.BigEndian.Uint32(b[offLastDelta:]))
		if last < offset || last < l.mu.start {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

func (l *fakeLog) Bounds(from int64) (int64, int64, int64, []AbortedTxn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lso := l.mu.lso
	if lso < 0 {
		lso = l.mu.next
	}
	return l.mu.start, l.mu.next, lso, slices.Clone(l.mu.aborted)
}

func (l *fakeLog) OffsetForTimestamp(ts int64) (int64, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.mu.byTime {
		if e.ts >= ts {
			return e.off, true, nil
		}
	}
	return 0, false, nil
}

type harness struct {
	t    testing.TB
	dir  string
	sys  *actor.ActorSystem
	log  *fakeLog
	cfg  Config
	repl replication.Replicator
	m    *Manager
}

func newHarness(t *testing.T, cfg Config) *harness { return newHarnessWith(t, cfg, nil) }

func newHarnessWith(t testing.TB, cfg Config, repl replication.Replicator) *harness {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &harness{t: t, dir: t.TempDir(), log: newFakeLog(), cfg: cfg, repl: repl}
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	h.open()
	t.Cleanup(func() {
		if h.m != nil {
			_ = h.m.Close()
		}
		h.sys.Shutdown()
	})
	return h
}

func (h *harness) open() {
	m, err := NewManager(Options{
		DataDir: h.dir,
		Root:    h.sys.Root,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Logs: func(topic string, p int32) (Log, bool) {
			if topic != "t" || p != 0 {
				return nil, false
			}
			return h.log, true
		},
		Config: func(string) Config { return h.cfg },
		Repl:   h.repl,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.m = m
}

func (h *harness) reopen() {
	if err := h.m.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

var key = Key{Group: "g", Topic: "t", Partition: 0}

// wait waits for a reply; replies must come, and come once.
func wait[T any](t testing.TB, call func(func(T))) T {
	t.Helper()
	ch := make(chan T, 2)
	call(func(v T) { ch <- v })
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
	}
	panic("unreachable")
}

func (h *harness) acquire(member string, max int32) AcquireResult {
	return wait(h.t, func(r func(AcquireResult)) {
		h.m.Acquire(AcquireRequest{Key: key, Member: member, MaxRecords: max}, r)
	})
}

func (h *harness) ack(member string, acks ...AckBatch) int16 {
	return wait(h.t, func(r func(int16)) { h.m.Acknowledge(key, member, acks, r) })
}

func (h *harness) state() string { return h.m.inspect(key).String() }

func ranges(r AcquireResult) []AcquiredRange { return r.Acquired }

func TestManagerAcquireAckRestart(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest"})
	h.log.append(5, false, false, -1)
	h.log.append(5, false, false, -1)
	r := h.acquire("a", 100)
	if r.ErrorCode != 0 || !slices.Equal(ranges(r), []AcquiredRange{{0, 9, 1}}) || len(parseBatches(r.Records)) != 2 {
		t.Fatalf("acquire: %+v", r)
	}
	if r.LockTimeoutMs != 30000 || r.HighWatermark != 10 {
		t.Fatalf("lock %d hwm %d", r.LockTimeoutMs, r.HighWatermark)
	}
	if code := h.ack("b", AckBatch{0, 0, []AckType{AckAccept}}); code != kerr.InvalidRecordState.Code {
		t.Fatalf("another member's ack: %d", code)
	}
	if code := h.ack("a", AckBatch{0, 4, []AckType{AckAccept}}); code != 0 {
		t.Fatalf("ack: %d", code)
	}
	h.reopen()
	// The accepted records stay accepted; the lock is gone but the
	// delivery count stays.
	if got, want := h.state(), "spso=5 end=10 [5-9 available n=1]"; got != want {
		t.Fatalf("after restart: %s, want %s", got, want)
	}
	r = h.acquire("b", 100)
	if !slices.Equal(ranges(r), []AcquiredRange{{5, 9, 2}}) || len(parseBatches(r.Records)) != 1 {
		t.Fatalf("reacquire: %+v", r)
	}
}

func TestManagerLatestStartsAtTheEnd(t *testing.T) {
	h := newHarness(t, Config{})
	h.log.append(10, false, false, -1)
	if r := h.acquire("a", 100); r.ErrorCode != 0 || len(r.Acquired) != 0 || r.Records != nil {
		t.Fatalf("latest: %+v", r)
	}
	h.log.append(3, false, false, -1)
	if r := h.acquire("a", 100); !slices.Equal(ranges(r), []AcquiredRange{{10, 12, 1}}) {
		t.Fatalf("after produce: %+v", r)
	}
	so := wait(t, func(r func([]StartOffset)) { h.m.StartOffsets("g", nil, r) })
	if len(so) != 1 || so[0].StartOffset != 10 || so[0].Lag != 3 {
		t.Fatalf("start offsets: %+v", so)
	}
	unknown := wait(t, func(r func([]StartOffset)) { h.m.StartOffsets("other", []TopicPartition{{Topic: "t"}}, r) })
	if len(unknown) != 1 || unknown[0].StartOffset != -1 || unknown[0].ErrorCode != 0 {
		t.Fatalf("never initialised: %+v", unknown)
	}
}

func TestManagerLockExpiry(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest", RecordLockDuration: 50 * time.Millisecond, DeliveryCountLimit: 2})
	h.log.append(4, false, false, -1)
	if r := h.acquire("a", 100); len(r.Acquired) != 1 {
		t.Fatalf("acquire: %+v", r)
	}
	testwait.For(t, "the lock to expire", 10*time.Second, func() bool { return h.state() == "spso=0 end=4 [0-3 available n=1]" })
	if r := h.acquire("b", 100); !slices.Equal(ranges(r), []AcquiredRange{{0, 3, 2}}) {
		t.Fatalf("second delivery: %+v", r)
	}
	// At the delivery limit the expiry archives: the SPSO moves on.
	testwait.For(t, "the records to be archived", 10*time.Second, func() bool { return h.state() == "spso=4 end=4" })
	if code := h.ack("b", AckBatch{0, 3, []AckType{AckAccept}}); code != kerr.InvalidRecordState.Code {
		t.Fatalf("ack after expiry: %d", code)
	}
}

func TestManagerReleaseAndDelete(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest"})
	h.log.append(6, false, false, -1)
	h.acquire("a", 3)
	if code := wait(t, func(r func(int16)) { h.m.ReleaseGroupMember("g", "a", r) }); code != 0 {
		t.Fatalf("release: %d", code)
	}
	if got := h.state(); got != "spso=0 end=6 [0-5 available n=1]" {
		t.Fatalf("after release: %s", got)
	}
	res := wait(t, func(r func([]StartOffsetResult)) {
		h.m.AlterStartOffsets("g", []StartOffset{{Topic: "t", StartOffset: 4}, {Topic: "t", Partition: 1, StartOffset: -2}}, r)
	})
	if len(res) != 2 || res[0].ErrorCode != 0 || res[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("alter: %+v", res)
	}
	if r := h.acquire("a", 100); !slices.Equal(ranges(r), []AcquiredRange{{4, 5, 1}}) {
		t.Fatalf("after alter: %+v", r)
	}
	if code := wait(t, func(r func(int16)) { h.m.DeleteGroup("g", r) }); code != 0 {
		t.Fatalf("delete: %d", code)
	}
	h.reopen()
	if got := h.state(); got != "uninitialised" {
		t.Fatalf("after delete and restart: %s", got)
	}
	so := wait(t, func(r func([]StartOffset)) { h.m.StartOffsets("g", nil, r) })
	if len(so) != 0 {
		t.Fatalf("deleted group still lists %+v", so)
	}
}

func TestManagerReadCommitted(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest", ReadCommitted: true})
	h.log.append(2, false, true, 7)   // 0-1 aborted
	h.log.append(1, true, true, 7)    // 2 ABORT marker
	h.log.append(2, false, false, -1) // 3-4
	h.log.append(2, false, true, 8)   // 5-6 open transaction
	h.log.mu.Lock()
	h.log.mu.aborted = []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 2}}
	h.log.mu.lso = 5
	h.log.mu.Unlock()
	r := h.acquire("a", 100)
	if !slices.Equal(ranges(r), []AcquiredRange{{3, 4, 1}}) || len(parseBatches(r.Records)) != 1 {
		t.Fatalf("read_committed: %+v", r)
	}
	if got := h.state(); got != "spso=3 end=5 [3-4 acquired n=1 a@"+got[len("spso=3 end=5 [3-4 acquired n=1 a@"):] {
		t.Fatalf("state: %s", got)
	}
}

func TestManagerUnknownPartitionAndStandby(t *testing.T) {
	h := newHarness(t, Config{})
	r := wait(t, func(f func(AcquireResult)) {
		h.m.Acquire(AcquireRequest{Key: Key{Group: "g", Topic: "nope"}, Member: "a"}, f)
	})
	if r.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %+v", r)
	}
	h.m.Deactivate()
	if code := h.ack("a", AckBatch{0, 0, []AckType{AckAccept}}); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("standby: %d", code)
	}
	if err := h.m.Activate(); err != nil {
		t.Fatal(err)
	}
}

func TestManagerResetByDuration(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "by_duration:PT1H", ResetBy: time.Hour})
	h.log.append(10, false, false, -1)
	now := time.Now().UnixMilli()
	h.log.mu.Lock()
	h.log.mu.byTime = []struct{ ts, off int64 }{{now - 2*3600_000, 0}, {now - 1800_000, 6}}
	h.log.mu.Unlock()
	if r := h.acquire("a", 100); !slices.Equal(ranges(r), []AcquiredRange{{6, 9, 1}}) {
		t.Fatalf("by_duration: %+v", r)
	}
	// Nothing that recent: from the end.
	h.m.DeleteGroup("g", func(int16) {})
	h.log.mu.Lock()
	h.log.mu.byTime = h.log.mu.byTime[:1]
	h.log.mu.Unlock()
	testwait.For(t, "the group's state to be deleted", 10*time.Second, func() bool { return h.state() == "uninitialised" })
	h.log.append(2, false, false, -1)
	if r := h.acquire("a", 100); r.ErrorCode != 0 || len(r.Acquired) != 0 || h.state() != "spso=12 end=12" {
		t.Fatalf("by_duration, nothing that recent: %+v, %s", r, h.state())
	}
}

// heldRepl applies at once (as Local) but holds the answers until
// released: a write in flight, as a slow raft commit leaves it.
type heldRepl struct {
	local *replication.Local
	mu    sync.Mutex
	held  []func()
}

func (r *heldRepl) Register(key string, a replication.Applier) { r.local.Register(key, a) }
func (r *heldRepl) Unregister(key string)                      { r.local.Unregister(key) }
func (r *heldRepl) Propose(key string, cmd replication.Command, done func(any, error)) {
	r.local.Propose(key, cmd, func(res any, err error) {
		r.mu.Lock()
		r.held = append(r.held, func() { done(res, err) })
		r.mu.Unlock()
	})
}

func (r *heldRepl) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

func (r *heldRepl) release() {
	r.mu.Lock()
	held := r.held
	r.held = nil
	r.mu.Unlock()
	for _, f := range held {
		f()
	}
}

// TestManagerWriteInFlight: requests wait behind a write in flight and are
// served in order once it lands; a deactivation answers the write in
// flight REQUEST_TIMED_OUT and what waits NOT_LEADER_OR_FOLLOWER, each
// exactly once, even when the write's answer arrives afterwards.
func TestManagerWriteInFlight(t *testing.T) {
	repl := &heldRepl{local: replication.NewLocal()}
	h := newHarnessWith(t, Config{AutoOffsetReset: "earliest"}, repl)
	h.log.append(4, false, false, -1)

	first := make(chan AcquireResult, 2)
	h.m.Acquire(AcquireRequest{Key: key, Member: "a", MaxRecords: 2, RecordLimit: true}, func(r AcquireResult) { first <- r })
	testwait.For(t, "the first write", 10*time.Second, func() bool { return repl.count() == 1 })
	second := make(chan AcquireResult, 2)
	h.m.Acquire(AcquireRequest{Key: key, Member: "b", MaxRecords: 2, RecordLimit: true}, func(r AcquireResult) { second <- r })
	repl.release()
	if r := <-first; !slices.Equal(r.Acquired, []AcquiredRange{{0, 1, 1}}) {
		t.Fatalf("first: %+v", r)
	}
	testwait.For(t, "the second write", 10*time.Second, func() bool { return repl.count() == 1 })
	repl.release()
	if r := <-second; !slices.Equal(r.Acquired, []AcquiredRange{{2, 3, 1}}) {
		t.Fatalf("second (served after the first): %+v", r)
	}

	// A write in flight and a request behind it, then a deactivation.
	acks := make(chan int16, 2)
	h.m.Acknowledge(key, "a", []AckBatch{{0, 1, []AckType{AckAccept}}}, func(c int16) { acks <- c })
	testwait.For(t, "the ack's write", 10*time.Second, func() bool { return repl.count() == 1 })
	waiting := make(chan int16, 2)
	h.m.ReleaseMember(key, "b", func(c int16) { waiting <- c })
	h.m.Deactivate()
	if c := <-acks; c != kerr.RequestTimedOut.Code {
		t.Fatalf("write in flight at deactivation: %d", c)
	}
	if c := <-waiting; c != kerr.NotLeaderForPartition.Code {
		t.Fatalf("waiting at deactivation: %d", c)
	}
	repl.release() // the write's answer, late: nobody is answered twice
	if err := h.m.Activate(); err != nil {
		t.Fatal(err)
	}
	// The ack was written (the outcome the client could not know): the
	// new activation loads it.
	if got := h.state(); got != "spso=2 end=4 [2-3 available n=1]" {
		t.Fatalf("after reactivation: %s", got)
	}
	select {
	case c := <-acks:
		t.Fatalf("ack answered twice: %d", c)
	case c := <-waiting:
		t.Fatalf("release answered twice: %d", c)
	default:
	}
}

// TestManagerThrottlesByBatchSize: the fetch's BatchSize, not its
// MaxRecords (a fetch's share of its records split over its partitions),
// is what throttled redeliveries are cut from; and a limit of 3 makes a
// record failed twice go alone.
func TestManagerThrottlesByBatchSize(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest", DeliveryCountLimit: 5})
	h.log.append(40, false, false, -1)
	acquire := func(member string) AcquireResult {
		return wait(t, func(r func(AcquireResult)) {
			h.m.Acquire(AcquireRequest{Key: key, Member: member, MaxRecords: 40, BatchSize: 16}, r)
		})
	}
	release := func(member string, r AcquireResult) {
		t.Helper()
		for _, a := range r.Acquired {
			if code := h.ack(member, AckBatch{a.First, a.Last, []AckType{AckRelease}}); code != 0 {
				t.Fatalf("release %+v: %d", a, code)
			}
		}
	}
	for n := int16(1); n <= 3; n++ {
		r := acquire("a")
		if !slices.Equal(ranges(r), []AcquiredRange{{0, 39, n}}) {
			t.Fatalf("delivery %d: %+v", n, r.Acquired)
		}
		release("a", r)
	}
	// Count 3 of 5: 16 >> 1 records, not 40 >> 1.
	r := acquire("a")
	if !slices.Equal(ranges(r), []AcquiredRange{{0, 7, 4}}) {
		t.Fatalf("throttled: %+v, want 0-7 at 4", r.Acquired)
	}
	release("a", r)
	// Count 4: the last delivery, alone.
	if r := acquire("b"); !slices.Equal(ranges(r), []AcquiredRange{{0, 0, 5}}) {
		t.Fatalf("last delivery: %+v, want 0-0 at 5", r.Acquired)
	}
}

// TestManagerAdminRefusesHeldRecords: AlterStartOffsets and DeleteState
// need an empty group, which the coordinator checks just before; a member
// that joined since and acquired records makes them answer
// NON_EMPTY_GROUP and keep its locks. Once its records are acknowledged
// (or its locks expire) they go ahead; a deleted group drops held
// records regardless.
func TestManagerAdminRefusesHeldRecords(t *testing.T) {
	h := newHarness(t, Config{AutoOffsetReset: "earliest", RecordLockDuration: time.Hour})
	h.log.append(6, false, false, -1)
	h.acquire("a", 3)
	held := h.state()
	alter := func() int16 {
		res := wait(t, func(r func([]StartOffsetResult)) {
			h.m.AlterStartOffsets("g", []StartOffset{{Topic: "t", StartOffset: 4}}, r)
		})
		return res[0].ErrorCode
	}
	if code := alter(); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter with records held: %d, want NON_EMPTY_GROUP", code)
	}
	if code := wait(t, func(r func(int16)) { h.m.DeleteState("g", []string{"t"}, r) }); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete offsets with records held: %d, want NON_EMPTY_GROUP", code)
	}
	if got := h.state(); got != held {
		t.Fatalf("state changed by refused calls: %s, was %s", got, held)
	}
	if code := h.ack("a", AckBatch{0, 5, []AckType{AckAccept}}); code != 0 {
		t.Fatalf("ack: %d", code)
	}
	if code := alter(); code != 0 {
		t.Fatalf("alter once nothing is held: %d", code)
	}
	if got := h.state(); got != "spso=4 end=4" {
		t.Fatalf("after alter: %s", got)
	}
	h.acquire("b", 1)
	if code := wait(t, func(r func(int16)) { h.m.DeleteGroup("g", r) }); code != 0 {
		t.Fatalf("deleted group: %d", code)
	}
	if got := h.state(); got != "uninitialised" {
		t.Fatalf("after group deletion: %s", got)
	}
}
