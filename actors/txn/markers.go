package txn

// Writing the markers that end a transaction: a COMMIT or ABORT control
// batch on every partition it touched and a commit or abort of its
// groups' pending offsets. Writes go out in parallel; what each answer
// means is markerset.go's to say: retriable failures are sent again with
// backoff (the decision is already durable), and the transaction completes
// only once every partition has its marker.

import (
	"time"
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
	a.marking.set = markerSet{}
	a.marking.completing = false
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
	a.marking.set.begin(len(targets))
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
			// The partition was deleted: there is nothing to end (Kafka
			// drops a partition whose leader it cannot find).
			a.logger.Info("partition gone; its marker is not needed", "target", t)
			done(nil)
			continue
		}
		p.WriteTxnMarker(m.ProducerID, m.ProducerEpoch, m.Commit, a.epoch, done)
	}
}

// markerDone takes one answer; the round's last one completes the
// transaction, schedules the resend of the retriable ones, or halts.
func (a *txnActor) markerDone(m *markerMsg) {
	verdict, step := a.marking.set.answer(m.target, m.err)
	switch verdict {
	case markerRetry:
		a.logger.Warn("marker write failed; will retry", "target", m.target, "attempt", a.marking.attempt, "err", m.err)
	case markerDropped:
		a.logger.Info("partition takes no transactional data; its marker is not needed", "target", m.target, "err", m.err)
	case markerFenced:
		a.logger.Warn("marker refused: a newer coordinator or producer epoch wrote there; this coordinator stops sending and leaves the transaction pending",
			"target", m.target, "coordinator_epoch", a.epoch, "producer_id", a.t.ProducerID, "epoch", a.t.ProducerEpoch, "err", m.err)
	case markerBroken:
		a.logger.Error("marker refused with an unexpected error; the transaction stays pending until the coordinator reloads",
			"target", m.target, "coordinator_epoch", a.epoch, "producer_id", a.t.ProducerID, "epoch", a.t.ProducerEpoch, "err", m.err)
	}
	switch step {
	case stepWait:
		return
	case stepComplete:
		a.markersDone()
		return
	}
	if !a.marking.answered {
		// The outcome is decided and durable; the client need not wait
		// for a partition that is slow to take its marker (Kafka answers
		// EndTxn once the decision is written).
		a.marking.answered = true
		a.answerWaiters(Result{ProducerID: -1, ProducerEpoch: -1})
	}
	if step == stepHalt {
		return
	}
	a.scheduleRetry()
}

func (a *txnActor) scheduleRetry() {
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
	if a.marking.completing {
		// The markers were written but completing failed.
		a.markersDone()
		return
	}
	a.send(a.t.PendingMarkers(), a.marking.set.retry)
}

// markersDone persists the completed state and answers the EndTxn.
func (a *txnActor) markersDone() {
	a.marking.completing = false
	st := MarkersWritten(a.t, a.nowMs())
	if st.Next == nil {
		return
	}
	if err := a.apply(st); err != nil {
		// The markers are written; completing is retried (writing the
		// markers again is harmless: a partition without the open
		// transaction takes a marker as a no-op).
		a.marking.completing = true
		gen, self, root := a.marking.gen, a.self, a.c.o.Root
		a.retry = time.AfterFunc(markerBackoffMax, func() { root.Send(self, &retryMarkersMsg{gen: gen}) })
		a.answerWaiters(errResult(err))
		return
	}
	a.answerWaiters(Result{ProducerID: st.ProducerID, ProducerEpoch: st.ProducerEpoch})
}
