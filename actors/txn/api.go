package txn

// The Coordinator's request methods, one per transactional operation. Each
// routes to the transactional id's actor and calls reply exactly once;
// errors are *kerr.Error values (possibly wrapped), and mapping them to an
// older request version's codes is the protocol layer's job.

import (
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID is a transactional InitProducerId. expected (v3+, KIP-360)
// is the producer the caller last had, or nil. A timeout outside
// (0, MaxTimeout] is INVALID_TRANSACTION_TIMEOUT; an open transaction is
// fenced and aborted and CONCURRENT_TRANSACTIONS answered (retry).
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, expected *ProducerIDAndEpoch, reply func(Result)) {
	if timeoutMs <= 0 || timeoutMs > c.cfg.MaxTimeoutMs {
		reply(errResult(kerr.InvalidTransactionTimeout))
		return
	}
	c.dispatch(id, &initMsg{in: InitInput{ID: id, TimeoutMs: timeoutMs, Expected: expected}, reply: reply})
}

// AddPartitions adds partitions to the producer's transaction, beginning
// it if none is open (AddPartitionsToTxn; tv2 for the v5 broker-to-broker
// form, KIP-890 part 2). The partitions must exist (the caller checks).
func (c *Coordinator) AddPartitions(id string, producerID int64, epoch int16, parts []TopicPartition, tv2 bool, reply func(Result)) {
	c.dispatch(id, &addMsg{in: AddInput{ProducerID: producerID, Epoch: epoch, Partitions: parts, TV2: tv2}, reply: reply})
}

// VerifyPartitions answers whether each partition is in the producer's
// open transaction (AddPartitionsToTxn VerifyOnly, KIP-890 part 1): a
// Result whose Err applies to all, or whose Partitions has one entry per
// partition (nil, or INVALID_TXN_STATE when not in the transaction). The
// produce path checks its batches with Append instead, which also orders
// them before the transaction's markers.
func (c *Coordinator) VerifyPartitions(id string, producerID int64, epoch int16, parts []TopicPartition, reply func(Result)) {
	c.dispatch(id, &addMsg{in: AddInput{ProducerID: producerID, Epoch: epoch, Partitions: parts}, verify: true, reply: reply})
}

// Append hands a transactional batch for tp to its partition once the
// partition is known to be in the producer's open transaction: checked
// (add false: the verification of KIP-890 part 1, for clients of
// transaction version 1, Produce v3-11) or added to it (add true: the
// implicit add of KIP-890 part 2, Produce v12+). appendFn runs on the
// transaction's actor and must only enqueue the batch on the partition
// (never block): as the markers that end the transaction are sent from
// the same actor afterwards, a batch it let through always reaches the
// partition before them, so it can never land after its transaction's
// marker and leave a transaction hanging. Every transactional batch comes
// this way, so the coordinator's state is the memory of what was
// verified. refuse gets the coordinator's *kerr.Error (INVALID_TXN_STATE
// when the partition is not in the transaction); the produce path maps it
// to the codes producers expect. Exactly one of appendFn and refuse runs.
func (c *Coordinator) Append(id string, producerID int64, epoch int16, tp TopicPartition, add bool, appendFn func(), refuse func(error)) {
	c.dispatch(id, &appendMsg{in: AddInput{ProducerID: producerID, Epoch: epoch, Partitions: []TopicPartition{tp}, TV2: add}, add: add, appendFn: appendFn, refuse: refuse})
}

// AddOffsets adds a consumer group to the transaction (AddOffsetsToTxn), so
// that its TxnOffsetCommits are committed or dropped with it.
func (c *Coordinator) AddOffsets(id string, producerID int64, epoch int16, group string, reply func(Result)) {
	if c.o.Offsets == nil {
		reply(errResult(kerr.CoordinatorNotAvailable))
		return
	}
	c.dispatch(id, &addMsg{in: AddInput{ProducerID: producerID, Epoch: epoch, Groups: []string{group}}, reply: reply})
}

// CommitOffsets is a TxnOffsetCommit: checked against the transaction (v5:
// the group is added to it) and handed to the OffsetsSink. reply gets the
// sink's response, or a nil response and the error that refused the
// request for every partition.
func (c *Coordinator) CommitOffsets(req *kmsg.TxnOffsetCommitRequest, reply func(*kmsg.TxnOffsetCommitResponse, error)) {
	c.dispatch(req.TransactionalID, &offsetsMsg{req: req, reply: reply})
}

// CheckOffsets is a TxnOffsetCommit's check alone, for a group coordinated
// on another node: the transaction must be open with the group in it (v5:
// the group is added), and reply gets an empty response or the error that
// refused it. The group's coordinator stages the offsets itself
// (group.Manager.TxnCommitOffsetsGuarded).
func (c *Coordinator) CheckOffsets(req *kmsg.TxnOffsetCommitRequest, reply func(error)) {
	c.dispatch(req.TransactionalID, &offsetsMsg{req: req, checkOnly: true, reply: func(_ *kmsg.TxnOffsetCommitResponse, err error) { reply(err) }})
}

// EndTxn commits or aborts the producer's transaction. tv2 (EndTxn v5)
// bumps the epoch and answers the producer to use next. The answer comes
// once every marker is written, or as soon as one fails (the outcome is
// durable; markers are retried until written).
func (c *Coordinator) EndTxn(id string, producerID int64, epoch int16, commit, tv2 bool, reply func(Result)) {
	c.dispatch(id, &endMsg{in: EndInput{ProducerID: producerID, Epoch: epoch, Commit: commit, TV2: tv2}, reply: reply})
}

// Describe answers a copy of the id's state, or TRANSACTIONAL_ID_NOT_FOUND.
func (c *Coordinator) Describe(id string, reply func(*Txn, error)) {
	c.dispatch(id, &describeMsg{reply: reply})
}

// Summary is what ListTransactions shows of an id.
type Summary struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	State         State
	StartMs       int64
	// LastUpdateMs orders idle ids for the budget (budget.go).
	LastUpdateMs int64
}

func summarize(t *Txn) Summary {
	return Summary{ID: t.ID, ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch, State: t.State, StartMs: t.StartMs, LastUpdateMs: t.LastUpdateMs}
}

// ListFilter selects ids for List; zero fields select everything.
type ListFilter struct {
	States      []State
	ProducerIDs []int64
	// ByDuration: only ids whose transaction started more than
	// RunningLongerThanMs before NowMs (ListTransactions v1
	// DurationFilter; as in Kafka, an id with no transaction started
	// counts as started at -1).
	ByDuration          bool
	RunningLongerThanMs int64
	NowMs               int64
	// Pattern matches the transactional id (v2).
	Pattern *regexp.Regexp
}

// List returns the ids that pass f, sorted.
func (c *Coordinator) List(f ListFilter) []Summary {
	c.mu.Lock()
	out := make([]Summary, 0, len(c.mu.summaries))
	for _, s := range c.mu.summaries {
		switch {
		case len(f.States) > 0 && !slices.Contains(f.States, s.State),
			len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, s.ProducerID),
			f.ByDuration && f.NowMs-s.StartMs <= f.RunningLongerThanMs,
			f.Pattern != nil && !f.Pattern.MatchString(s.ID):
			continue
		}
		out = append(out, s)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Summary) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Stats counts KIP-890 traffic since the coordinator opened.
type Stats struct {
	// EndTxnV5 is EndTxn requests of transaction version 2.
	EndTxnV5 int64
	// ImplicitAdds is partitions added to a transaction by a Produce
	// v12+ (KIP-890 part 2).
	ImplicitAdds int64
	// VerifyRefused is transactional batches refused because their
	// partition was not in the producer's transaction (KIP-890 part 1).
	VerifyRefused int64
}

// Stats reads the counters.
func (c *Coordinator) Stats() Stats {
	return Stats{EndTxnV5: c.stats.endTxnV5.Load(), ImplicitAdds: c.stats.implicitAdds.Load(), VerifyRefused: c.stats.verifyRefused.Load()}
}
