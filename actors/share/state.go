package share

// The share-partition state machine: pure (no IO, no goroutines, time is
// an argument). The actor (actor.go) owns one State and feeds it.
//
// The window is the in-flight records [StartOffset, EndOffset): the
// share-partition start offset (SPSO) and the offset after the last
// record read into the window (the SPEO is EndOffset-1). It is held as
// spans of uniform state, so memory grows with the number of state
// changes in flight, not with the records.
//
// Invariants (checkInvariants):
//   - spans cover [StartOffset, EndOffset) contiguously, in order, none
//     empty, and no two neighbours are mergeable;
//   - the first span is not terminal (ACKNOWLEDGED or ARCHIVED): the SPSO
//     moves over the leading run of terminal records at once;
//   - only ACQUIRED spans have a member and a deadline.

import (
	"fmt"
	"math"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RecState is an in-flight record's state.
type RecState int8

const (
	Available RecState = iota
	Acquired
	Acknowledged
	Archived
)

func (s RecState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", int8(s))
}

func (s RecState) terminal() bool { return s == Acknowledged || s == Archived }

// span is offsets First..Last (inclusive) in one state.
type span struct {
	First, Last int64
	State       RecState
	// Count is the delivery count: acquisitions so far.
	Count int16
	// Member holds the lock and Deadline (unix ms) ends it: ACQUIRED only.
	Member   string
	Deadline int64
}

func (s span) len() int64 { return s.Last - s.First + 1 }

// mergeable reports whether b may extend a (a just before b).
func (a span) mergeable(b span) bool {
	if a.Last+1 != b.First || a.State != b.State {
		return false
	}
	if a.State.terminal() {
		return true // counts no longer matter
	}
	return a.Count == b.Count && a.Member == b.Member && a.Deadline == b.Deadline
}

// State is one share-partition's state. The zero value is uninitialised.
type State struct {
	Initialized bool
	// TopicID is the topic's id when initialised: a recreated topic
	// (another id) starts the share-partition afresh.
	TopicID     [16]byte
	StartOffset int64
	EndOffset   int64
	spans       []span
}

// Limits are the group configs a step needs, resolved (no zero values).
type Limits struct {
	LockMs        int64
	DeliveryLimit int16
	MaxInFlight   int64
}

func (c Config) limits() Limits {
	l := Limits{LockMs: c.RecordLockDuration.Milliseconds(), DeliveryLimit: int16(c.DeliveryCountLimit), MaxInFlight: int64(c.MaxRecordLocks)}
	if l.LockMs <= 0 {
		l.LockMs = 30000
	}
	switch {
	case c.DeliveryCountLimit <= 0:
		l.DeliveryLimit = 5
	case c.DeliveryCountLimit > math.MaxInt16:
		l.DeliveryLimit = math.MaxInt16
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = 2000
	}
	return l
}

// Clone returns a deep copy (the actor steps a copy and adopts it once
// the durable part is written).
func (s *State) Clone() *State {
	c := *s
	c.spans = append([]span(nil), s.spans...)
	return &c
}

// Init starts the share-partition at offset with an empty window.
func (s *State) Init(topicID [16]byte, offset int64) {
	*s = State{Initialized: true, TopicID: topicID, StartOffset: offset, EndOffset: offset}
}

// Reset moves the share-partition to start at offset, dropping every
// in-flight record (AlterShareGroupOffsets).
func (s *State) Reset(offset int64) { s.Init(s.TopicID, offset) }

// TrimTo drops the records below the log start offset: they no longer
// exist.
func (s *State) TrimTo(logStart int64) {
	if logStart <= s.StartOffset {
		return
	}
	if logStart >= s.EndOffset {
		s.StartOffset, s.EndOffset, s.spans = logStart, logStart, nil
		return
	}
	s.split(logStart)
	i := s.find(logStart)
	s.spans = append(s.spans[:0], s.spans[i:]...)
	s.StartOffset = logStart
	s.advance()
}

// ReadOffset is where the next acquisition reads the log from: the first
// AVAILABLE record in the window, else the window's end.
func (s *State) ReadOffset() int64 {
	for _, sp := range s.spans {
		if sp.State == Available {
			return sp.First
		}
	}
	return s.EndOffset
}

// Batch describes a stored record batch read from the log.
type Batch struct {
	Base, Last int64
	// Control batches (transaction markers) and batches of aborted
	// transactions (read_committed) are archived, never handed out.
	Control, Aborted bool
}

// AcquireInput is one acquisition's parameters.
type AcquireInput struct {
	Member      string
	NowMs       int64
	MaxRecords  int64
	RecordLimit bool
	// Limit is the offset no record may reach: the high watermark, or
	// the last stable offset for read_committed.
	Limit   int64
	Batches []Batch
	// ThrottleBase is what throttled redeliveries are cut from (the
	// fetch's batch size; <= 0: MaxRecords). See throttleFrom.
	ThrottleBase int64
}

// throttleFrom is the delivery count from which redeliveries are
// throttled, as Kafka 4.2 throttles them: half the limit, rounded up, and
// at least 2. A throttled acquisition takes the throttled records in a
// fetch of their own, and fewer of them at each further delivery: at most
// base >> (count - from + 1), at least 1; a record on its last delivery
// (count limit-1, limits above 2) goes alone. So when a consumer fails a
// whole batch over one bad record, the batch is split, halving each time,
// and only the bad record reaches the limit and is archived, not the
// records delivered with it.
func (l Limits) throttleFrom() int16 { return max(2, (l.DeliveryLimit+1)/2) }

// Acquire acquires records of the batches (in offset order, as read from
// ReadOffset) for in.Member: AVAILABLE records in the window and new
// records past its end. It returns the ranges acquired and, per batch,
// whether any of its records was.
func (s *State) Acquire(in AcquireInput, lim Limits) (ranges []AcquiredRange, used []bool) {
	used = make([]bool, len(in.Batches))
	var got int64
	deadline := in.NowMs + lim.LockMs
	take := func(first, last int64, count int16, bi int) {
		used[bi] = true
		got += last - first + 1
		if n := len(ranges); n > 0 && ranges[n-1].Last+1 == first && ranges[n-1].DeliveryCount == count {
			ranges[n-1].Last = last
			return
		}
		ranges = append(ranges, AcquiredRange{First: first, Last: last, DeliveryCount: count})
	}
	// room is how many more records this acquisition may take.
	room := func() int64 {
		if !in.RecordLimit && got < in.MaxRecords {
			return 1 << 62 // batch_optimized: the whole batch
		}
		return in.MaxRecords - got
	}
	// Throttled redeliveries (throttleFrom): once a record at or past the
	// throttling count is met, throttleLeft is what may still be taken and
	// nothing past the window is; stop ends the acquisition.
	throttled, stop := false, false
	var throttleLeft int64
	from := lim.throttleFrom()
	base := in.ThrottleBase
	if base <= 0 {
		base = in.MaxRecords
	}
	for bi, b := range in.Batches {
		if stop || got >= in.MaxRecords || b.Last >= in.Limit || b.Last < b.Base {
			break
		}
		if b.Last < s.StartOffset {
			continue
		}
		startRoom := room()
		// Records already in the window: the AVAILABLE ones.
		for off := max(b.Base, s.StartOffset); off <= min(b.Last, s.EndOffset-1) && startRoom > 0; {
			i := s.find(off)
			sp := s.spans[i]
			if sp.State != Available || b.Control || b.Aborted {
				off = sp.Last + 1
				continue
			}
			last := min(sp.Last, b.Last, off+startRoom-1)
			if lim.DeliveryLimit > 2 && sp.Count >= from && sp.Count < lim.DeliveryLimit {
				lastDelivery := sp.Count == lim.DeliveryLimit-1
				if got > 0 && (!throttled || lastDelivery) {
					stop = true // they go in a fetch of their own
					break
				}
				if !throttled {
					throttled = true
					throttleLeft = max(1, base>>(sp.Count-from+1))
					if lastDelivery {
						throttleLeft = 1 // alone
					}
				}
			}
			if throttled {
				last = min(last, off+throttleLeft-1)
			}
			s.split(off)
			s.split(last + 1)
			i = s.find(off)
			if sp.Count >= lim.DeliveryLimit {
				// Delivered as often as allowed already (a limit lowered,
				// or a lock lost in a restart at the limit).
				s.spans[i].State = Archived
			} else {
				count := sp.Count + 1
				s.spans[i] = span{First: off, Last: last, State: Acquired, Count: count, Member: in.Member, Deadline: deadline}
				take(off, last, count, bi)
				startRoom -= last - off + 1
				if throttled {
					if throttleLeft -= last - off + 1; throttleLeft <= 0 {
						stop = true
						break
					}
				}
			}
			off = last + 1
		}
		if stop {
			break
		}
		// New records past the window's end: none in a throttled fetch.
		if throttled {
			continue
		}
		if b.Last < s.EndOffset {
			continue
		}
		if s.EndOffset-s.StartOffset >= lim.MaxInFlight {
			break // enough in flight: wait for some to complete
		}
		first := max(b.Base, s.EndOffset)
		if first > s.EndOffset {
			// Offsets in no batch (compacted away): nothing to deliver.
			s.appendSpan(span{First: s.EndOffset, Last: first - 1, State: Archived})
		}
		if b.Control || b.Aborted {
			s.appendSpan(span{First: first, Last: b.Last, State: Archived})
			continue
		}
		n := min(b.Last-first+1, room())
		if n <= 0 {
			break
		}
		s.appendSpan(span{First: first, Last: first + n - 1, State: Acquired, Count: 1, Member: in.Member, Deadline: deadline})
		take(first, first+n-1, 1, bi)
	}
	s.coalesce()
	s.advance()
	return ranges, used
}

// Acknowledge applies member's acks, all or none. It returns Kafka's
// error code: INVALID_REQUEST for a malformed batch, INVALID_RECORD_STATE
// when an offset is not ACQUIRED by member.
func (s *State) Acknowledge(member string, nowMs int64, acks []AckBatch, lim Limits) int16 {
	for _, a := range acks {
		if a.Last < a.First || (len(a.Types) != 1 && int64(len(a.Types)) != a.Last-a.First+1) {
			return kerr.InvalidRequest.Code
		}
		for _, t := range a.Types {
			if t < AckGap || t > AckRenew {
				return kerr.InvalidRequest.Code
			}
		}
		if a.First < s.StartOffset || a.Last >= s.EndOffset {
			return kerr.InvalidRecordState.Code
		}
		for off := a.First; off <= a.Last; {
			sp := s.spans[s.find(off)]
			if sp.State != Acquired || sp.Member != member {
				return kerr.InvalidRecordState.Code
			}
			off = sp.Last + 1
		}
	}
	for _, a := range acks {
		if len(a.Types) == 1 {
			s.ackRange(a.First, a.Last, a.Types[0], nowMs, lim)
			continue
		}
		// Per-offset types: apply runs of one type together.
		for i := 0; i < len(a.Types); {
			j := i
			for j+1 < len(a.Types) && a.Types[j+1] == a.Types[i] {
				j++
			}
			s.ackRange(a.First+int64(i), a.First+int64(j), a.Types[i], nowMs, lim)
			i = j + 1
		}
	}
	s.advance()
	return 0
}

// ackRange applies one ack type to first..last, all ACQUIRED (checked).
func (s *State) ackRange(first, last int64, t AckType, nowMs int64, lim Limits) {
	s.split(first)
	s.split(last + 1)
	for i := s.find(first); i < len(s.spans) && s.spans[i].First <= last; i++ {
		sp := &s.spans[i]
		switch t {
		case AckAccept:
			*sp = span{First: sp.First, Last: sp.Last, State: Acknowledged, Count: sp.Count}
		case AckGap, AckReject:
			*sp = span{First: sp.First, Last: sp.Last, State: Archived, Count: sp.Count}
		case AckRelease:
			*sp = unlocked(*sp, lim)
		case AckRenew:
			sp.Deadline = nowMs + lim.LockMs
		}
	}
	s.coalesce()
}

// unlocked is sp with its lock gone: AVAILABLE, or ARCHIVED once it was
// delivered DeliveryLimit times.
func unlocked(sp span, lim Limits) span {
	st := Available
	if sp.Count >= lim.DeliveryLimit {
		st = Archived
	}
	return span{First: sp.First, Last: sp.Last, State: st, Count: sp.Count}
}

// Release unlocks every record member holds (its session closed or it
// left); it reports whether anything changed.
func (s *State) Release(member string, lim Limits) bool {
	return s.unlockWhere(lim, func(sp span) bool { return sp.Member == member })
}

// Expire unlocks the records whose lock ended by nowMs.
func (s *State) Expire(nowMs int64, lim Limits) bool {
	return s.unlockWhere(lim, func(sp span) bool { return sp.Deadline <= nowMs })
}

func (s *State) unlockWhere(lim Limits, match func(span) bool) bool {
	changed := false
	for i := range s.spans {
		if s.spans[i].State == Acquired && match(s.spans[i]) {
			s.spans[i] = unlocked(s.spans[i], lim)
			changed = true
		}
	}
	if changed {
		s.coalesce()
		s.advance()
	}
	return changed
}

// Locked reports whether a member holds a lock that has not ended by
// nowMs.
func (s *State) Locked(nowMs int64) bool {
	for _, sp := range s.spans {
		if sp.State == Acquired && sp.Deadline > nowMs {
			return true
		}
	}
	return false
}

// NextDeadline is the earliest lock deadline (ok false: no lock held).
func (s *State) NextDeadline() (ms int64, ok bool) {
	for _, sp := range s.spans {
		if sp.State == Acquired && (!ok || sp.Deadline < ms) {
			ms, ok = sp.Deadline, true
		}
	}
	return ms, ok
}

// Lag is the records from the SPSO to hwm not yet acknowledged or
// archived (records past the window count whole: not yet delivered).
func (s *State) Lag(hwm int64) int64 {
	if !s.Initialized {
		return -1
	}
	lag := max(hwm-s.EndOffset, 0)
	for _, sp := range s.spans {
		if !sp.State.terminal() && sp.First < hwm {
			lag += min(sp.Last, hwm-1) - sp.First + 1
		}
	}
	return lag
}

// Acquired counts the records currently ACQUIRED (tests, metrics).
func (s *State) Acquired() int64 {
	var n int64
	for _, sp := range s.spans {
		if sp.State == Acquired {
			n += sp.len()
		}
	}
	return n
}

// find returns the index of the span holding off (which is in the window).
func (s *State) find(off int64) int {
	lo, hi := 0, len(s.spans)
	for lo < hi {
		m := (lo + hi) / 2
		if s.spans[m].Last < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// split makes off the first offset of a span (when it is inside one).
func (s *State) split(off int64) {
	if off <= s.StartOffset || off >= s.EndOffset {
		return
	}
	i := s.find(off)
	sp := s.spans[i]
	if sp.First == off {
		return
	}
	left, right := sp, sp
	left.Last, right.First = off-1, off
	s.spans = append(s.spans, span{})
	copy(s.spans[i+2:], s.spans[i+1:])
	s.spans[i], s.spans[i+1] = left, right
}

// appendSpan extends the window with sp (sp.First == EndOffset).
func (s *State) appendSpan(sp span) {
	if n := len(s.spans); n > 0 && s.spans[n-1].mergeable(sp) {
		s.spans[n-1].Last = sp.Last
	} else {
		s.spans = append(s.spans, sp)
	}
	s.EndOffset = sp.Last + 1
}

// coalesce merges mergeable neighbours.
func (s *State) coalesce() {
	out := s.spans[:0]
	for _, sp := range s.spans {
		if n := len(out); n > 0 && out[n-1].mergeable(sp) {
			out[n-1].Last = sp.Last
			continue
		}
		out = append(out, sp)
	}
	s.spans = out
}

// advance moves the SPSO over the leading terminal records.
func (s *State) advance() {
	i := 0
	for i < len(s.spans) && s.spans[i].State.terminal() {
		i++
	}
	if i == 0 {
		return
	}
	if i == len(s.spans) {
		s.StartOffset, s.spans = s.EndOffset, s.spans[:0]
		return
	}
	s.StartOffset = s.spans[i].First
	s.spans = append(s.spans[:0], s.spans[i:]...)
}

// checkInvariants returns the first broken invariant (tests).
func (s *State) checkInvariants() error {
	next := s.StartOffset
	for i, sp := range s.spans {
		switch {
		case sp.First != next || sp.Last < sp.First:
			return fmt.Errorf("span %d [%d,%d] does not continue at %d", i, sp.First, sp.Last, next)
		case i == 0 && sp.State.terminal():
			return fmt.Errorf("first span is %s: the SPSO did not advance", sp.State)
		case i > 0 && s.spans[i-1].mergeable(sp):
			return fmt.Errorf("spans %d and %d are mergeable", i-1, i)
		case sp.State != Acquired && (sp.Member != "" || sp.Deadline != 0):
			return fmt.Errorf("span %d is %s with a lock", i, sp.State)
		}
		next = sp.Last + 1
	}
	if next != s.EndOffset {
		return fmt.Errorf("spans end at %d, window at %d", next, s.EndOffset)
	}
	return nil
}

// String shows the state (scripts, logs).
func (s *State) String() string {
	if !s.Initialized {
		return "uninitialised"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "spso=%d end=%d", s.StartOffset, s.EndOffset)
	for _, sp := range s.spans {
		fmt.Fprintf(&b, " [%d-%d %s", sp.First, sp.Last, sp.State)
		if !sp.State.terminal() {
			fmt.Fprintf(&b, " n=%d", sp.Count)
		}
		if sp.State == Acquired {
			fmt.Fprintf(&b, " %s@%d", sp.Member, sp.Deadline)
		}
		b.WriteString("]")
	}
	return b.String()
}
