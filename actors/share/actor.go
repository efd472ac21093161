package share

// The share-partition actor: a thin shell around one State. It steps a
// copy of the state, writes the copy's durable form through the
// replicator when it changed, and adopts the copy and answers once the
// write is applied; requests that arrive meanwhile wait in order. It
// keeps one timer, armed for the earliest lock deadline.

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage"
)

const (
	defaultMaxRecords = 500
	defaultMaxBytes   = 1 << 20
)

// request is a message that carries a reply.
type request interface {
	// fail answers with code and nothing else.
	fail(code int16)
	// notServing is the code answered when no actor serves it (a
	// manager on standby or closed).
	notServing() int16
}

type (
	acquireMsg struct {
		req   AcquireRequest
		reply func(AcquireResult)
		// g, when set, writes this acquisition with its fetch's others.
		g *gather
	}
	ackMsg struct {
		member string
		acks   []AckBatch
		reply  func(int16)
		g      *gather
	}
	releaseMsg struct {
		member string
		reply  func(int16)
	}
	startMsg struct {
		tp    TopicPartition
		reply func(StartOffset)
	}
	alterMsg struct {
		off   StartOffset
		reply func(int16)
	}
	// deleteMsg forgets the state; with ifUnlocked only while no member
	// holds a lock (DeleteShareGroupOffsets), not for a deleted group.
	deleteMsg struct {
		ifUnlocked bool
		reply      func(int16)
	}
	// inspectMsg hands a copy of the state to tests.
	inspectMsg struct{ reply func(*State) }
	// expireMsg ends the locks past their deadline (the timer's tick).
	expireMsg struct{}

	tickMsg      struct{}
	persistedMsg struct {
		p   *pending
		err error
	}
)

func (m *acquireMsg) fail(code int16) { m.reply(AcquireResult{ErrorCode: code}) }
func (m *ackMsg) fail(code int16)     { m.reply(code) }
func (m *releaseMsg) fail(code int16) { m.reply(code) }
func (m *startMsg) fail(code int16) {
	m.reply(StartOffset{Topic: m.tp.Topic, TopicID: m.tp.TopicID, Partition: m.tp.Partition, StartOffset: -1, Lag: -1, ErrorCode: code})
}
func (m *alterMsg) fail(code int16)   { m.reply(code) }
func (m *deleteMsg) fail(code int16)  { m.reply(code) }
func (m *inspectMsg) fail(code int16) { m.reply(nil) }
func (*expireMsg) fail(int16)         {}

// gathered is a request that may belong to a gather; detach takes it out
// (reporting nothing), and returns the gather it left or nil.
type gathered interface{ detach() *gather }

func (m *acquireMsg) detach() *gather { return detachGather(&m.g) }
func (m *ackMsg) detach() *gather     { return detachGather(&m.g) }

func detachGather(gp **gather) *gather {
	g := *gp
	*gp = nil
	return g
}

// The data path answers NOT_LEADER_OR_FOLLOWER (the client refreshes its
// metadata); the admin calls NOT_COORDINATOR.
func (*acquireMsg) notServing() int16 { return kerr.NotLeaderForPartition.Code }
func (*ackMsg) notServing() int16     { return kerr.NotLeaderForPartition.Code }
func (*releaseMsg) notServing() int16 { return kerr.NotLeaderForPartition.Code }
func (*startMsg) notServing() int16   { return kerr.NotCoordinator.Code }
func (*alterMsg) notServing() int16   { return kerr.NotCoordinator.Code }
func (*deleteMsg) notServing() int16  { return kerr.NotCoordinator.Code }
func (*inspectMsg) notServing() int16 { return kerr.NotCoordinator.Code }
func (*expireMsg) notServing() int16  { return 0 }

// pending is the state write in flight and the answer it holds.
type pending struct {
	next   *State
	value  []byte
	answer func(code int16)
}

// spActor owns one share-partition. Every field is touched only on the
// actor's goroutine (the timer and the write's callback only send
// messages).
type spActor struct {
	m      *Manager
	key    partKey
	st     *State
	logger *slog.Logger
	// persisted is the durable form last written (nil: none).
	persisted []byte
	busy      *pending
	queue     []request
	timer     *time.Timer
	timerAt   int64
	// received counts the requests received (the Manager's retire
	// compares it with what it sent).
	received uint64
	// gather is the gather of the request being handled, until its put
	// (or nothing) is reported to it.
	gather *gather
	self   *actor.PID
	root   *actor.RootContext
}

func newActor(m *Manager, k partKey, st *State) *spActor {
	a := &spActor{m: m, key: k, st: st, root: m.o.Root, logger: m.logger.With("share_partition", k.String())}
	if st == nil {
		a.st = &State{}
	}
	a.persisted = a.st.durable()
	return a
}

// Receive implements actor.Actor.
func (a *spActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.rearm()
	case *actor.Stopping:
		a.shutdown()
	case *persistedMsg:
		a.written(msg)
		a.maybeRetire()
	case *tickMsg:
		a.timer, a.timerAt = nil, 0
		if a.busy != nil {
			return // rearmed when the write ends
		}
		a.handle(&expireMsg{})
	case request:
		a.received++
		defer a.maybeRetire()
		if a.busy != nil {
			// It waits for the write in flight: its gather must not.
			if gm, ok := msg.(gathered); ok {
				if g := gm.detach(); g != nil {
					g.report(nil)
				}
			}
			a.queue = append(a.queue, msg)
			return
		}
		a.handle(msg)
	}
}

// handle runs one request; a panic answers it (protoactor would drop the
// message) and keeps the state as it was.
func (a *spActor) handle(r request) {
	if gm, ok := r.(gathered); ok {
		a.gather = gm.detach()
	}
	defer func() {
		if p := recover(); p != nil {
			a.logger.Error("share-partition request panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			a.busy = nil
			r.fail(kerr.UnknownServerError.Code)
		}
		if g := a.gather; g != nil {
			a.gather = nil
			g.report(nil) // nothing to write
		}
	}()
	switch msg := r.(type) {
	case *acquireMsg:
		a.acquire(msg)
	case *ackMsg:
		next := a.st.Clone()
		lim := a.limits()
		now := a.nowMs()
		avail := next.Expire(now, lim) // a lock past its deadline is gone, timer or not
		if code := next.Acknowledge(msg.member, now, msg.acks, lim); code != 0 {
			msg.reply(code)
			return
		}
		// Released records, or room in a window that was full.
		avail = avail || releases(msg.acks) || (a.windowFull(a.st, lim) && !a.windowFull(next, lim))
		a.commit(next, a.telling(avail, msg.reply))
	case *releaseMsg:
		next := a.st.Clone()
		avail := next.Release(msg.member, a.limits())
		a.commit(next, a.telling(avail, msg.reply))
	case *startMsg:
		a.describe(msg)
	case *alterMsg:
		if a.memberHoldsRecords() {
			msg.reply(kerr.NonEmptyGroup.Code)
			return
		}
		next := a.st.Clone()
		if !next.Initialized || (msg.off.TopicID != [16]byte{} && next.TopicID != msg.off.TopicID) {
			next.Init(msg.off.TopicID, msg.off.StartOffset)
		} else {
			next.Reset(msg.off.StartOffset)
		}
		a.commit(next, msg.reply)
	case *deleteMsg:
		if msg.ifUnlocked && a.memberHoldsRecords() {
			msg.reply(kerr.NonEmptyGroup.Code)
			return
		}
		a.commit(&State{}, msg.reply)
	case *inspectMsg:
		msg.reply(a.st.Clone())
	case *expireMsg:
		next := a.st.Clone()
		avail := next.Expire(a.nowMs(), a.limits())
		a.commit(next, a.telling(avail, func(int16) {}))
	}
}

// memberHoldsRecords reports whether a lock on the share-partition is
// still in force. The admin calls that drop in-flight state need an empty
// group, which the group coordinator checked a moment before: a member
// that joined since and has acquired records is seen here, where
// acquisitions are ordered with them, and the call is refused rather than
// its locks dropped.
func (a *spActor) memberHoldsRecords() bool { return a.st.Locked(a.nowMs()) }

// telling wraps answer: once the step is adopted (code 0), and when avail
// says it made records available to acquire, the Manager's listener is
// told (waiting fetches look again).
func (a *spActor) telling(avail bool, answer func(code int16)) func(int16) {
	if !avail {
		return answer
	}
	return func(code int16) {
		if code == 0 {
			a.m.available(a.key)
		}
		answer(code)
	}
}

// windowFull reports whether st holds as many in-flight records as the
// share-partition may: nothing more is acquired until it shrinks.
func (a *spActor) windowFull(st *State, lim Limits) bool {
	return st.Initialized && st.EndOffset-st.StartOffset >= lim.MaxInFlight
}

// releases reports whether acks give records back (RELEASE).
func releases(acks []AckBatch) bool {
	for _, b := range acks {
		if slices.Contains(b.Types, AckRelease) {
			return true
		}
	}
	return false
}

func (a *spActor) nowMs() int64   { return a.m.o.Now().UnixMilli() }
func (a *spActor) config() Config { return a.m.config(a.key.Group) }
func (a *spActor) limits() Limits { return a.config().limits() }

// acquire initialises the share-partition if needed, reads the log from
// the first available offset and acquires what the state machine gives.
func (a *spActor) acquire(msg *acquireMsg) {
	req := msg.req
	cfg := a.config()
	lim := cfg.limits()
	lg, ok := a.m.o.Logs(a.key.Topic, a.key.Partition)
	if !ok {
		msg.reply(AcquireResult{ErrorCode: kerr.UnknownTopicOrPartition.Code})
		return
	}
	next := a.st.Clone()
	logStart, hwm, lso, aborted := lg.Bounds(max(next.StartOffset, 0))
	if !next.Initialized || (req.Key.TopicID != [16]byte{} && next.TopicID != [16]byte{} && next.TopicID != req.Key.TopicID) {
		off, err := initialOffset(lg, cfg, logStart, hwm, a.m.o.Now())
		if err != nil {
			a.logger.Warn("share-partition initialisation", "err", err)
			msg.reply(AcquireResult{ErrorCode: kerr.KafkaStorageError.Code})
			return
		}
		next.Init(req.Key.TopicID, off)
	} else if next.TopicID == [16]byte{} {
		next.TopicID = req.Key.TopicID
	}
	next.TrimTo(logStart)
	now := a.nowMs()
	next.Expire(now, lim)
	res := AcquireResult{LogStartOffset: logStart, HighWatermark: hwm, LockTimeoutMs: int32(lim.LockMs)}
	limit := hwm
	if cfg.ReadCommitted {
		limit = lso
	}
	from := next.ReadOffset()
	inFlightRoom := from < next.EndOffset || next.EndOffset-next.StartOffset < lim.MaxInFlight
	if from < limit && inFlightRoom {
		maxBytes := int(req.MaxBytes)
		if maxBytes <= 0 {
			maxBytes = defaultMaxBytes
		}
		buf, err := lg.Read(from, maxBytes)
		switch {
		case errors.Is(err, storage.ErrOffsetOutOfRange):
			// Retention moved the log start since Bounds: the next
			// acquisition trims and reads again.
			buf = nil
		case err != nil:
			a.logger.Warn("share-partition read", "offset", from, "err", err)
			msg.reply(AcquireResult{ErrorCode: kerr.KafkaStorageError.Code})
			return
		}
		stored := parseBatches(buf)
		if cfg.ReadCommitted {
			markAborted(stored, aborted)
		}
		batches := make([]Batch, len(stored))
		for i, b := range stored {
			batches[i] = b.Batch
		}
		maxRecords := int64(req.MaxRecords)
		if maxRecords <= 0 {
			maxRecords = defaultMaxRecords
		}
		ranges, used := next.Acquire(AcquireInput{Member: req.Member, NowMs: now, MaxRecords: maxRecords,
			RecordLimit: req.RecordLimit, Limit: limit, Batches: batches, ThrottleBase: int64(req.BatchSize)}, lim)
		if !req.RecordLimit {
			ranges = splitToBatchSize(ranges, batches, int64(req.BatchSize))
		}
		res.Acquired = ranges
		for i, u := range used {
			if u {
				res.Records = append(res.Records, buf[stored[i].start:stored[i].end]...)
			}
		}
	}
	a.commit(next, func(code int16) {
		if code != 0 {
			msg.reply(AcquireResult{ErrorCode: code})
			return
		}
		msg.reply(res)
	})
}

// initialOffset is where a new share-partition starts:
// share.auto.offset.reset.
func initialOffset(lg Log, cfg Config, logStart, hwm int64, now time.Time) (int64, error) {
	switch {
	case cfg.AutoOffsetReset == "earliest":
		return logStart, nil
	case len(cfg.AutoOffsetReset) > len("by_duration:") && cfg.AutoOffsetReset[:len("by_duration:")] == "by_duration:":
		off, found, err := lg.OffsetForTimestamp(now.Add(-cfg.ResetBy).UnixMilli())
		if err != nil {
			return 0, fmt.Errorf("offset for timestamp: %w", err)
		}
		if !found {
			return hwm, nil // nothing that recent: from the end, as Kafka
		}
		return max(off, logStart), nil
	default:
		return hwm, nil
	}
}

// describe answers the SPSO and the lag.
func (a *spActor) describe(msg *startMsg) {
	out := StartOffset{Topic: msg.tp.Topic, TopicID: msg.tp.TopicID, Partition: msg.tp.Partition, StartOffset: -1, Lag: -1}
	if a.st.Initialized {
		out.StartOffset = a.st.StartOffset
		if lg, ok := a.m.o.Logs(a.key.Topic, a.key.Partition); ok {
			_, hwm, _, _ := lg.Bounds(a.st.StartOffset)
			out.Lag = a.st.Lag(hwm)
		}
	}
	msg.reply(out)
}

// commit adopts next and answers: at once when its durable form is what
// was written last, else once the write is applied. answer gets 0 or the
// write's error code (the state is then kept as it was).
func (a *spActor) commit(next *State, answer func(code int16)) {
	v := next.durable()
	if bytes.Equal(v, a.persisted) {
		a.adopt(next)
		answer(0)
		a.rearm()
		return
	}
	if err := checkKeyLens(a.key); err != nil {
		a.logger.Error("share-partition state", "err", err)
		answer(kerr.InvalidRequest.Code)
		return
	}
	p := &pending{next: next, value: v, answer: answer}
	a.busy = p
	root, self := a.root, a.self
	// Through the Manager's writer: written with the other
	// share-partitions' states that wait meanwhile.
	w := put{key: a.key, value: v, done: func(err error) {
		root.Send(self, &persistedMsg{p: p, err: err})
	}}
	if g := a.gather; g != nil {
		a.gather = nil
		g.report(&w)
		return
	}
	a.m.w.put(w)
}

// adopt makes next the state, and tells the Manager when the
// share-partition gained or lost its state (what its group's listings and
// deletions visit).
func (a *spActor) adopt(next *State) {
	if next.Initialized != a.st.Initialized {
		a.m.track(a.key, next.Initialized)
	}
	a.st = next
}

// maybeRetire asks the Manager to stop this actor when it holds no
// state and nothing waits: a deleted share-partition (or one never
// initialised) keeps no actor.
func (a *spActor) maybeRetire() {
	if a.busy == nil && len(a.queue) == 0 && !a.st.Initialized && a.timer == nil {
		a.m.retire(a.key, a.self, a.received)
	}
}

// written ends the write in flight and serves what waited.
func (a *spActor) written(msg *persistedMsg) {
	p := a.busy
	if p == nil || msg.p != p {
		return // answered already (shutdown)
	}
	a.busy = nil
	code := int16(0)
	if msg.err != nil {
		code = errorCode(msg.err)
		a.logger.Warn("share-partition state write", "err", msg.err)
	} else {
		a.adopt(p.next)
		a.persisted = p.value
	}
	p.answer(code)
	a.rearm()
	for a.busy == nil && len(a.queue) > 0 {
		r := a.queue[0]
		a.queue[0] = nil
		a.queue = a.queue[1:]
		a.handle(r)
	}
}

// errorCode maps a write's error to Kafka's code.
func errorCode(err error) int16 {
	switch {
	case errors.Is(err, replication.ErrOutcomeUnknown):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, replication.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}

// rearm arms the timer for the earliest lock deadline.
func (a *spActor) rearm() {
	d, ok := a.st.NextDeadline()
	if !ok {
		if a.timer != nil {
			a.timer.Stop()
			a.timer, a.timerAt = nil, 0
		}
		return
	}
	if a.timer != nil && a.timerAt <= d {
		return // fires first; rearms then
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	root, self := a.root, a.self
	a.timerAt = d
	a.timer = time.AfterFunc(time.Duration(d-a.nowMs())*time.Millisecond, func() { root.Send(self, &tickMsg{}) })
}

// shutdown answers what waits: the write in flight may or may not land.
func (a *spActor) shutdown() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	if p := a.busy; p != nil {
		a.busy = nil
		p.answer(kerr.RequestTimedOut.Code)
	}
	for _, r := range a.queue {
		r.fail(r.notServing())
	}
	a.queue = nil
}
