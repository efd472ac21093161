package txn

// The pure state machine of one transactional id. It does no IO and keeps
// no clock: every input carries the time (ms since the epoch), and every
// change is returned as a new *Txn for the actor to persist and only then
// adopt, so that a failed write leaves the state as it was.
//
// The rules are Kafka's (TransactionCoordinator / TransactionMetadata),
// with transaction version 1 semantics for EndTxn v0-4 and version 2
// (KIP-890 part 2: an epoch bump on every EndTxn) for v5.

import (
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's phase. The numbers are persisted.
type State int8

const (
	StateEmpty             State = 0
	StateOngoing           State = 1
	StatePrepareCommit     State = 2
	StatePrepareAbort      State = 3
	StateCompleteCommit    State = 4
	StateCompleteAbort     State = 5
	StateDead              State = 6
	StatePrepareEpochFence State = 7 // never persisted: a fence goes straight to PrepareAbort here
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name of the state (DescribeTransactions,
// ListTransactions filters).
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState maps a Kafka state name to a State.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// preparing: markers are being written; the transaction accepts nothing
// but retries of the EndTxn that started it.
func (s State) preparing() bool { return s == StatePrepareCommit || s == StatePrepareAbort }

// terminal: no transaction is open.
func (s State) terminal() bool {
	return s == StateEmpty || s == StateCompleteCommit || s == StateCompleteAbort
}

// TopicPartition names a partition in a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) less(o TopicPartition) int {
	if c := strings.Compare(tp.Topic, o.Topic); c != 0 {
		return c
	}
	return int(tp.Partition) - int(o.Partition)
}

// Txn is the persisted state of one transactional id.
//
// Invariants: Partitions and Groups are sorted and unique, and empty
// unless State is Ongoing or preparing; StartMs >= 0 when Ongoing or
// preparing; NextProducerID is -1 unless preparing under TV2 with an
// exhausted epoch.
type Txn struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	// LastProducerID and LastProducerEpoch recognise a retried
	// InitProducerId (KIP-360) or EndTxn v5 (KIP-890) whose answer was
	// lost; -1 when none.
	LastProducerID    int64
	LastProducerEpoch int16
	// NextProducerID replaces ProducerID when a TV2 transaction whose
	// epoch ran out completes; -1 otherwise.
	NextProducerID int64
	TimeoutMs      int32
	State          State
	Partitions     []TopicPartition
	// Groups are the consumer groups whose offsets the transaction
	// commits (AddOffsetsToTxn).
	Groups []string
	// StartMs is when the transaction began (its first partition or
	// group); -1 after InitProducerId. Its deadline is StartMs+TimeoutMs.
	StartMs      int64
	LastUpdateMs int64
	// TV2: the client runs transaction version 2 (EndTxn v5+).
	TV2 bool
}

func (t *Txn) clone() *Txn {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	c.Groups = slices.Clone(t.Groups)
	return &c
}

// live: the id exists (nil and Dead mean it does not).
func (t *Txn) live() bool { return t != nil && t.State != StateDead }

// Deadline is when an open transaction times out, carrying the epoch the
// timeout applies to.
func (t *Txn) Deadline() (epoch int16, atMs int64, ok bool) {
	if t == nil || t.State != StateOngoing {
		return 0, 0, false
	}
	return t.ProducerEpoch, t.StartMs + int64(t.TimeoutMs), true
}

// ExpiresAt is when an idle id is forgotten.
func (t *Txn) ExpiresAt(c Config) (int64, bool) {
	if t == nil || !t.State.terminal() {
		return 0, false
	}
	return t.LastUpdateMs + c.IDExpirationMs, true
}

// Markers are the control markers (and group offset completions) that end
// a preparing transaction.
type Markers struct {
	Commit        bool
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition
	Groups        []string
}

// PendingMarkers returns what must be written to finish a preparing
// transaction, or nil.
func (t *Txn) PendingMarkers() *Markers {
	if t == nil || !t.State.preparing() {
		return nil
	}
	return &Markers{
		Commit:        t.State == StatePrepareCommit,
		ProducerID:    t.ProducerID,
		ProducerEpoch: t.ProducerEpoch,
		Partitions:    slices.Clone(t.Partitions),
		Groups:        slices.Clone(t.Groups),
	}
}

// Config is what the machine needs of the broker's settings.
type Config struct {
	MaxTimeoutMs   int32
	IDExpirationMs int64
}

// Step is the outcome of one input.
type Step struct {
	// Err is a *kerr.Error, or nil for success.
	Err error
	// ProducerID and ProducerEpoch are answered on success by
	// InitProducerId and EndTxn v5.
	ProducerID    int64
	ProducerEpoch int16
	// Next is the state to persist and then adopt; nil: unchanged.
	Next *Txn
	// AwaitMarkers: answer once Next's markers are written (EndTxn).
	AwaitMarkers bool
}

func fail(err error) Step { return Step{Err: err, ProducerID: -1, ProducerEpoch: -1} }

// isEpochExhausted: the epoch cannot be bumped again (Kafka keeps the
// last value free for fencing).
func isEpochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// ProducerIDAndEpoch is the producer an InitProducerId (v3+) or EndTxn
// says it is.
type ProducerIDAndEpoch struct {
	ProducerID int64
	Epoch      int16
}

// InitInput is a transactional InitProducerId.
type InitInput struct {
	ID        string
	TimeoutMs int32
	// Expected is the caller's current producer (KIP-360); nil: none.
	Expected *ProducerIDAndEpoch
}

// InitProducerID gives the id a producer: epoch 0 for a new id, the next
// epoch (fencing the previous producer) otherwise. An open transaction is
// fenced and aborted first and CONCURRENT_TRANSACTIONS answered, so that
// the retry bumps the epoch once more. alloc is called only when a new
// producer id is needed.
func InitProducerID(cur *Txn, in InitInput, nowMs int64, cfg Config, alloc func() (int64, error)) Step {
	if in.TimeoutMs <= 0 || in.TimeoutMs > cfg.MaxTimeoutMs {
		return fail(kerr.InvalidTransactionTimeout)
	}
	if !cur.live() {
		pid, err := alloc()
		if err != nil {
			return fail(err)
		}
		cur = &Txn{ID: in.ID, ProducerID: pid, ProducerEpoch: -1, LastProducerID: -1, LastProducerEpoch: -1,
			NextProducerID: -1, TimeoutMs: in.TimeoutMs, State: StateEmpty, StartMs: -1, LastUpdateMs: nowMs}
	}
	if cur.State.preparing() {
		return fail(kerr.ConcurrentTransactions)
	}
	if e := in.Expected; e != nil {
		valid := cur.ProducerEpoch == -1 || e.ProducerID == cur.ProducerID ||
			(e.ProducerID == cur.LastProducerID && isEpochExhausted(e.Epoch))
		if !valid {
			return fail(kerr.ProducerFenced)
		}
	}
	switch cur.State {
	case StateOngoing:
		// The epoch this fence takes is never returned to anyone.
		return Step{Err: kerr.ConcurrentTransactions, ProducerID: -1, ProducerEpoch: -1, Next: fence(cur, nowMs)}
	case StateEmpty, StateCompleteCommit, StateCompleteAbort:
	default:
		return fail(kerr.UnknownServerError)
	}
	next := cur.clone()
	switch e := in.Expected; {
	case isEpochExhausted(cur.ProducerEpoch) && (e == nil || e.Epoch == cur.ProducerEpoch):
		pid, err := alloc()
		if err != nil {
			return fail(err)
		}
		next.LastProducerID, next.LastProducerEpoch = cur.ProducerID, -1
		if e != nil {
			next.LastProducerEpoch = cur.ProducerEpoch
		}
		next.ProducerID, next.ProducerEpoch = pid, 0
	case e == nil:
		next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, -1
	case cur.ProducerEpoch == -1 || e.Epoch == cur.ProducerEpoch:
		next.ProducerEpoch, next.LastProducerEpoch = cur.ProducerEpoch+1, cur.ProducerEpoch
	case e.Epoch == cur.LastProducerEpoch:
		// A retry of a bump whose answer was lost: answer it again.
	default:
		return fail(kerr.ProducerFenced)
	}
	next.TimeoutMs = in.TimeoutMs
	next.State = StateEmpty
	next.Partitions, next.Groups = nil, nil
	next.StartMs, next.LastUpdateMs = -1, nowMs
	next.NextProducerID = -1
	return Step{ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch, Next: next}
}

// fence bumps the epoch of an open transaction and starts aborting it
// (Kafka's PrepareEpochFence followed by PrepareAbort).
func fence(cur *Txn, nowMs int64) *Txn {
	next := cur.clone()
	if next.ProducerEpoch < math.MaxInt16 {
		next.ProducerEpoch++
	}
	next.LastProducerEpoch = -1
	next.State = StatePrepareAbort
	next.NextProducerID = -1
	next.LastUpdateMs = nowMs
	return next
}

// checkProducer is the common check of a request naming the transaction's
// producer.
func checkProducer(cur *Txn, producerID int64, epoch int16) error {
	switch {
	case !cur.live() || cur.ProducerID != producerID:
		return kerr.InvalidProducerIDMapping
	case cur.ProducerEpoch != epoch:
		return kerr.ProducerFenced
	case cur.State.preparing():
		return kerr.ConcurrentTransactions
	}
	return nil
}

// AddInput adds partitions and groups to a transaction.
type AddInput struct {
	ProducerID int64
	Epoch      int16
	Partitions []TopicPartition
	Groups     []string
	TV2        bool
}

// Add adds partitions (AddPartitionsToTxn) or groups (AddOffsetsToTxn),
// beginning the transaction if none is open.
func Add(cur *Txn, in AddInput, nowMs int64) Step {
	if err := checkProducer(cur, in.ProducerID, in.Epoch); err != nil {
		return fail(err)
	}
	if cur.State == StateOngoing && containsAll(cur.Partitions, in.Partitions) && containsAllGroups(cur.Groups, in.Groups) {
		return Step{ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch}
	}
	next := cur.clone()
	if cur.State != StateOngoing {
		next.StartMs = nowMs
		next.Partitions, next.Groups = nil, nil
	}
	next.Partitions = mergePartitions(next.Partitions, in.Partitions)
	next.Groups = mergeGroups(next.Groups, in.Groups)
	next.State = StateOngoing
	next.LastUpdateMs = nowMs
	next.TV2 = next.TV2 || in.TV2
	return Step{ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch, Next: next}
}

// VerifyPartitions answers AddPartitionsToTxn's VerifyOnly (KIP-890 part
// 1): whether each partition is in the producer's open transaction. A
// non-nil err applies to every partition; otherwise perPartition has one
// entry (nil: in the transaction) per partition.
func VerifyPartitions(cur *Txn, producerID int64, epoch int16, parts []TopicPartition) (perPartition []error, err error) {
	if err := checkProducer(cur, producerID, epoch); err != nil {
		return nil, err
	}
	errs := make([]error, len(parts))
	for i, p := range parts {
		if cur.State != StateOngoing || !containsAll(cur.Partitions, []TopicPartition{p}) {
			errs[i] = kerr.InvalidTxnState
		}
	}
	return errs, nil
}

// AppendCheck decides whether a transactional batch for the partition in
// in.Partitions (one) may go to its partition: with add (Produce v12+,
// KIP-890 part 2) the partition is added to the transaction (Next when it
// was not in it yet, beginning the transaction if none is open); without
// (Produce v3-11, KIP-890 part 1) it must already be in the producer's
// open transaction, else INVALID_TXN_STATE.
func AppendCheck(cur *Txn, in AddInput, add bool, nowMs int64) Step {
	if add {
		in.TV2 = true
		return Add(cur, in, nowMs)
	}
	per, err := VerifyPartitions(cur, in.ProducerID, in.Epoch, in.Partitions)
	if err == nil && len(per) > 0 {
		err = per[0]
	}
	if err != nil {
		return fail(err)
	}
	return Step{ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch}
}

// VerifyGroup checks a TxnOffsetCommit (v0-4) against the transaction:
// the producer is current and the group was added with AddOffsetsToTxn.
func VerifyGroup(cur *Txn, producerID int64, epoch int16, group string) error {
	if err := checkProducer(cur, producerID, epoch); err != nil {
		return err
	}
	if cur.State != StateOngoing || !slices.Contains(cur.Groups, group) {
		return kerr.InvalidTxnState
	}
	return nil
}

// EndInput is an EndTxn.
type EndInput struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	// TV2: EndTxn v5+, which bumps the epoch on every end.
	TV2 bool
}

// EndTxn commits or aborts the open transaction. On success the caller
// persists Next, writes its markers and answers when they are written.
func EndTxn(cur *Txn, in EndInput, nowMs int64, alloc func() (int64, error)) Step {
	if in.TV2 {
		return endTxnV2(cur, in, nowMs, alloc)
	}
	if !cur.live() || cur.ProducerID != in.ProducerID {
		return fail(kerr.InvalidProducerIDMapping)
	}
	if cur.ProducerEpoch != in.Epoch {
		return fail(kerr.ProducerFenced)
	}
	same := Step{ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch}
	switch cur.State {
	case StateOngoing:
		next := cur.clone()
		next.State = prepareState(in.Commit)
		next.LastUpdateMs = nowMs
		return Step{ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch, Next: next, AwaitMarkers: true}
	case StateCompleteCommit, StateCompleteAbort:
		if (cur.State == StateCompleteCommit) == in.Commit {
			return same // a retry of the end that finished
		}
	case StatePrepareCommit, StatePrepareAbort:
		if (cur.State == StatePrepareCommit) == in.Commit {
			return fail(kerr.ConcurrentTransactions)
		}
	}
	return fail(kerr.InvalidTxnState)
}

func prepareState(commit bool) State {
	if commit {
		return StatePrepareCommit
	}
	return StatePrepareAbort
}

// endTxnV2 is EndTxn v5: every end bumps the epoch, a retry is recognised
// by the request's epoch being one behind, and an abort with nothing open
// is allowed (it bumps the epoch).
func endTxnV2(cur *Txn, in EndInput, nowMs int64, alloc func() (int64, error)) Step {
	if !cur.live() {
		return fail(kerr.InvalidProducerIDMapping)
	}
	retryOnBump := cur.ProducerEpoch == in.Epoch+1
	retryOnOverflow := cur.LastProducerID == in.ProducerID && in.Epoch == math.MaxInt16-1 && cur.ProducerEpoch == 0
	if cur.ProducerID != in.ProducerID && !retryOnOverflow {
		return fail(kerr.InvalidProducerIDMapping)
	}
	var valid bool
	switch cur.State {
	case StatePrepareCommit, StatePrepareAbort:
		valid = retryOnBump
	case StateCompleteCommit, StateCompleteAbort:
		valid = retryOnBump || retryOnOverflow || in.Epoch == cur.ProducerEpoch
	default:
		valid = in.Epoch == cur.ProducerEpoch
	}
	if !valid {
		return fail(kerr.ProducerFenced)
	}
	retry := retryOnBump || retryOnOverflow
	same := Step{ProducerID: cur.ProducerID, ProducerEpoch: cur.ProducerEpoch}
	prepare := func(commit, nothingAdded bool) Step {
		next := cur.clone()
		next.NextProducerID = -1
		if isEpochExhausted(cur.ProducerEpoch) {
			pid, err := alloc()
			if err != nil {
				return fail(err)
			}
			next.NextProducerID = pid
		}
		next.LastProducerEpoch = cur.ProducerEpoch
		if next.ProducerEpoch < math.MaxInt16 {
			next.ProducerEpoch++
		}
		next.State = prepareState(commit)
		if nothingAdded {
			next.StartMs = nowMs
			next.Partitions, next.Groups = nil, nil
		}
		next.LastUpdateMs = nowMs
		next.TV2 = true
		s := Step{ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch, Next: next, AwaitMarkers: true}
		if next.NextProducerID >= 0 {
			s.ProducerID, s.ProducerEpoch = next.NextProducerID, 0
		}
		return s
	}
	switch cur.State {
	case StateOngoing:
		return prepare(in.Commit, false)
	case StateEmpty:
		if !in.Commit {
			return prepare(false, true)
		}
	case StateCompleteCommit:
		switch {
		case in.Commit && retry:
			return same
		case !in.Commit && !retry:
			return prepare(false, true)
		}
	case StateCompleteAbort:
		switch {
		case !in.Commit && retry:
			return same
		case !in.Commit:
			return prepare(false, true)
		}
	case StatePrepareCommit, StatePrepareAbort:
		if (cur.State == StatePrepareCommit) == in.Commit {
			return fail(kerr.ConcurrentTransactions)
		}
	}
	return fail(kerr.InvalidTxnState)
}

// Timeout aborts a transaction still open at its deadline, fencing its
// producer. epoch is the epoch the timer was armed for; a stale timer (the
// transaction ended, or a new one began under a new epoch) does nothing.
func Timeout(cur *Txn, epoch int16, nowMs int64) Step {
	e, at, ok := cur.Deadline()
	if !ok || e != epoch || at > nowMs {
		return Step{}
	}
	return Step{Next: fence(cur, nowMs)}
}

// MarkersWritten completes a preparing transaction once every marker and
// group completion is durable.
func MarkersWritten(cur *Txn, nowMs int64) Step {
	if cur == nil || !cur.State.preparing() {
		return Step{}
	}
	next := cur.clone()
	next.State = StateCompleteAbort
	if cur.State == StatePrepareCommit {
		next.State = StateCompleteCommit
	}
	if cur.TV2 && cur.NextProducerID >= 0 {
		next.LastProducerID = cur.ProducerID
		next.ProducerID, next.ProducerEpoch = cur.NextProducerID, 0
	}
	next.NextProducerID = -1
	next.Partitions, next.Groups = nil, nil
	next.LastUpdateMs = nowMs
	return Step{ProducerID: next.ProducerID, ProducerEpoch: next.ProducerEpoch, Next: next}
}

// Expire forgets an id idle since before its expiration.
func Expire(cur *Txn, nowMs int64, cfg Config) Step {
	at, ok := cur.ExpiresAt(cfg)
	if !ok || at > nowMs {
		return Step{}
	}
	next := cur.clone()
	next.State = StateDead
	next.Partitions, next.Groups = nil, nil
	return Step{Next: next}
}

// Evict forgets an idle id before its expiration (the coordinator's
// budget, budget.go): only if it is still idle and was last updated at
// lastUpdateMs, when it was picked; otherwise nothing.
func Evict(cur *Txn, lastUpdateMs int64) Step {
	if cur == nil || !cur.State.terminal() || cur.LastUpdateMs != lastUpdateMs {
		return Step{}
	}
	next := cur.clone()
	next.State = StateDead
	next.Partitions, next.Groups = nil, nil
	return Step{Next: next}
}

func containsAll(have, want []TopicPartition) bool {
	for _, w := range want {
		if _, ok := slices.BinarySearchFunc(have, w, TopicPartition.less); !ok {
			return false
		}
	}
	return true
}

func containsAllGroups(have, want []string) bool {
	for _, w := range want {
		if _, ok := slices.BinarySearch(have, w); !ok {
			return false
		}
	}
	return true
}

func mergePartitions(have, add []TopicPartition) []TopicPartition {
	out := append(slices.Clone(have), add...)
	slices.SortFunc(out, TopicPartition.less)
	return slices.Compact(out)
}

func mergeGroups(have, add []string) []string {
	out := append(slices.Clone(have), add...)
	slices.Sort(out)
	return slices.Compact(out)
}
