package txn

// Writing the markers that end a transaction: a COMMIT or ABORT control
// batch on every partition it touched and a commit or abort of its
// groups' pending offsets. Writes go out in parallel; failures are retried
// with backoff until they succeed (the decision is already durable), and
// once all are done the transaction completes.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	markerBackoffMin = 100 * time.Millisecond
	markerBackoffMax = 5 * time.Second
)

// startMarkers sends every marker of the preparing state.
func (a *txnActor) startMarkers() {
	m := a.t.PendingMarkers()
	a.marking.gen++
	a.marking.attempt = 0
	a.marking.answered = false
	targets := make([]markerTarget, 0, len(m.Partitions)+len(m.Groups))
	for _, tp := range m.Partitions {
		targets = append(targets, markerTarget{tp: tp})
	}
	for _, g := range m.Groups {
		targets = append(targets, markerTarget{group: g})
	}
	a.send(m, targets)
}

// send writes the markers to targets; each answers with a markerMsg.
func (a *txnActor) send(m *Markers, targets []markerTarget) {
	a.marking.pending = len(targets)
	a.marking.failed = nil
	if len(targets) == 0 {
		a.markersDone()
		return
	}
	gen, self, root := a.marking.gen, a.self, a.c.o.Root
	for _, t := range targets {
		done := func(err error) { root.Send(self, &markerMsg{gen: gen, target: t, err: err}) }
		if t.group != "" {
			sink := a.c.o.Offsets
			if sink == nil {
				a.logger.Warn("no group coordinator to complete transactional offsets; skipping", "group", t.group)
				done(nil)
				continue
			}
			sink.CompleteTxn(t.group, m.ProducerID, m.Commit, done)
			continue
		}
		p := a.c.o.Partitions(t.tp.Topic, t.tp.Partition)
		if p == nil {
			// The partition was deleted: there is nothing to end.
			done(nil)
			continue
		}
		p.WriteTxnMarker(m.ProducerID, m.ProducerEpoch, m.Commit, a.c.o.CoordinatorEpoch, done)
	}
}

// markerDone counts one answer; the last one completes the transaction or
// schedules the retry of those that failed.
func (a *txnActor) markerDone(m *markerMsg) {
	if m.err != nil {
		if permanentMarkerError(m.err) {
			a.logger.Warn("marker refused; giving up on it", "target", m.target, "err", m.err)
		} else {
			a.marking.failed = append(a.marking.failed, m.target)
			a.logger.Warn("marker write failed; will retry", "target", m.target, "attempt", a.marking.attempt, "err", m.err)
		}
	}
	a.marking.pending--
	if a.marking.pending > 0 {
		return
	}
	if len(a.marking.failed) == 0 {
		a.markersDone()
		return
	}
	if !a.marking.answered {
		// The outcome is decided and durable; the client need not wait
		// for a partition that is slow to take its marker.
		a.marking.answered = true
		a.answerWaiters(Result{ProducerID: -1, ProducerEpoch: -1})
	}
	backoff := markerBackoffMin << min(a.marking.attempt, 6)
	backoff = min(backoff, markerBackoffMax)
	a.marking.attempt++
	gen, self, root := a.marking.gen, a.self, a.c.o.Root
	a.retry = time.AfterFunc(backoff, func() { root.Send(self, &retryMarkersMsg{gen: gen}) })
}

func (a *txnActor) resendFailed() {
	a.retry = nil
	if a.t == nil || !a.t.State.preparing() {
		return
	}
	if len(a.marking.failed) == 0 {
		// The markers were written but completing failed.
		a.markersDone()
		return
	}
	a.send(a.t.PendingMarkers(), a.marking.failed)
}

// markersDone persists the completed state and answers the EndTxn.
func (a *txnActor) markersDone() {
	st := MarkersWritten(a.t, a.nowMs())
	if st.Next == nil {
		return
	}
	if err := a.apply(st); err != nil {
		// The markers are written; completing is retried (writing the
		// markers again is harmless: a partition without the open
		// transaction takes a marker as a no-op).
		a.marking.failed = nil
		gen, self, root := a.marking.gen, a.self, a.c.o.Root
		a.marking.pending = 0
		a.retry = time.AfterFunc(markerBackoffMax, func() { root.Send(self, &retryMarkersMsg{gen: gen}) })
		a.answerWaiters(errResult(err))
		return
	}
	a.answerWaiters(Result{ProducerID: st.ProducerID, ProducerEpoch: st.ProducerEpoch})
}

// permanentMarkerError: the partition will never take this marker (a
// newer epoch or coordinator wrote there, or it is gone).
func permanentMarkerError(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.TransactionCoordinatorFenced) ||
		errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.ProducerFenced)
}
