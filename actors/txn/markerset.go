package txn

// What the coordinator makes of the answers to a transaction's markers,
// as Kafka's marker completion handler does. The transaction completes
// only once every partition has its marker (or was deleted, or can never
// have taken a transactional batch): it must never be reported complete
// while a partition lacks its marker, as that partition's open transaction
// would then hang and hold back its last stable offset.
//
// Pure: the actor (markers.go) sends, and feeds the answers here.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// markerVerdict is what one answer means for its target.
type markerVerdict int

const (
	// markerWritten: the target has its marker (or the partition was
	// deleted: the sender answers nil for a partition it cannot find,
	// as Kafka drops partitions whose leader it cannot find).
	markerWritten markerVerdict = iota
	// markerRetry: retriable (a leader moving, a timeout, a storage or
	// replication error): sent again after a backoff.
	markerRetry
	// markerDropped: the partition refuses transactional data outright
	// (UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION), so it holds
	// none of this transaction: off the pending set, as in Kafka.
	markerDropped
	// markerFenced: a newer producer epoch or coordinator epoch wrote
	// there; this coordinator is stale and stops sending. The
	// transaction stays pending here: the newer coordinator ends it.
	markerFenced
	// markerBroken: an error no partition should answer to a marker (a
	// broken invariant; Kafka throws): logged, the target stays pending
	// and is not resent, so the transaction stays pending until the
	// coordinator reloads and sends its markers again.
	markerBroken
)

func (v markerVerdict) String() string {
	switch v {
	case markerWritten:
		return "written"
	case markerRetry:
		return "retry"
	case markerDropped:
		return "dropped"
	case markerFenced:
		return "fenced"
	default:
		return "broken"
	}
}

// classifyMarker reads one marker answer. An error that is not a Kafka
// error code comes from this broker's own write path (storage, the
// replicator, a closing partition): retriable, as KAFKA_STORAGE_ERROR is.
func classifyMarker(err error) markerVerdict {
	if err == nil {
		return markerWritten
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return markerRetry
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.NotEnoughReplicas,
		kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut, kerr.KafkaStorageError:
		// UNKNOWN_TOPIC_OR_PARTITION too: the resend looks the partition
		// up again and drops it if it was deleted.
		return markerRetry
	case kerr.UnsupportedForMessageFormat, kerr.UnsupportedVersion:
		return markerDropped
	case kerr.InvalidProducerEpoch, kerr.TransactionCoordinatorFenced:
		return markerFenced
	default:
		return markerBroken
	}
}

// markerSet is the bookkeeping of one transaction's markers across rounds
// of sends. Invariant: done() only when every target was written or
// dropped.
type markerSet struct {
	// inFlight counts the round's answers still to come.
	inFlight int
	// retry is the round's retriable targets, sent again next round.
	retry []markerTarget
	// stuck is targets refused with a broken invariant: never resent,
	// never complete (kept across rounds).
	stuck []markerTarget
	// fenced: this coordinator was fenced; nothing more is sent.
	fenced bool
}

// markerStep is what the shell does once a round has all its answers.
type markerStep int

const (
	// stepWait: answers are still outstanding.
	stepWait markerStep = iota
	// stepComplete: every target has its marker; complete the
	// transaction.
	stepComplete
	// stepRetry: resend the retry targets after a backoff.
	stepRetry
	// stepHalt: fenced, or stuck on a broken invariant: nothing is sent
	// and the transaction stays pending.
	stepHalt
)

func (s markerStep) String() string {
	return [...]string{"wait", "complete", "retry", "halt"}[s]
}

// begin starts a round of n sends (the first, or a resend of retry).
func (m *markerSet) begin(n int) {
	m.inFlight = n
	m.retry = nil
}

// answer records one target's answer; once the round has all of them it
// says what comes next.
func (m *markerSet) answer(t markerTarget, err error) (markerVerdict, markerStep) {
	v := classifyMarker(err)
	if t.group != "" && v != markerWritten {
		// Completing a group's offsets is the local group coordinator's
		// idempotent write: whatever failed, it is retried.
		v = markerRetry
	}
	switch v {
	case markerRetry:
		m.retry = append(m.retry, t)
	case markerFenced:
		m.fenced = true
	case markerBroken:
		m.stuck = append(m.stuck, t)
	}
	m.inFlight--
	return v, m.step()
}

// step is what follows the answers so far.
func (m *markerSet) step() markerStep {
	switch {
	case m.inFlight > 0:
		return stepWait
	case m.fenced:
		return stepHalt
	case len(m.retry) > 0:
		return stepRetry
	case len(m.stuck) > 0:
		return stepHalt
	default:
		return stepComplete
	}
}
