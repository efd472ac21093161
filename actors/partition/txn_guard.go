package partition

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Transactional batches checked by a coordinator on another node. A
// partition raft group's leader need not run the transaction coordinator:
// it asks the coordinator (over the network) whether the partition is in
// the producer's transaction, and appends once it is told so. Meanwhile
// the transaction may end, its marker written here, and a batch appended
// after its marker would open a transaction no coordinator will end (a
// hanging transaction). The guard closes that window, as Kafka's
// verification guard does: the batch is appended only if no marker for its
// producer was proposed here since the check began. Markers and appends
// are both proposed by this partition's actor, in the order raft commits
// them, so "no marker proposed since" means "no marker before it in the
// log".

//
// As Kafka's partition leaders, the actor asks for a check only when the
// producer's transaction is not known open here (ProduceOrCheck): once it
// proposed a checked batch of the producer's transaction (its epoch) in
// the current raft term, and no marker of the producer since, the
// coordinator has the partition in that transaction and will end it with
// a marker, so later batches at that epoch go straight to the log. The
// term matters: in another term another leader may have proposed the
// marker this actor never saw. While a batch of the producer waits for
// its check, the producer's next batches wait behind it (they are checked
// too), so none overtakes it.

// txnGuards counts, per producer id, the markers this partition's actor
// proposed. Written by the actor (a marker), read by TxnGuard from any
// goroutine; the mutex is Partition.guards'. It grows by one entry per
// producer that ends a transaction here while the partition is open.
type txnGuards struct {
	markers map[int64]uint64
	// open: the producer's transaction known open here (set when a
	// checked batch is proposed, dropped with its marker); checking: its
	// batches handed to a check and not yet back. Actor goroutine only.
	open     map[int64]openTxn
	checking map[int64]int
}

// openTxn is a transaction a checked batch was proposed in: the
// producer's epoch and the raft term it was proposed in.
type openTxn struct {
	epoch int16
	term  int32
}

// TxnGuard begins a check of a transactional batch of producer pid made
// elsewhere: ProduceGuarded appends the batch only if no marker for pid
// was proposed here after this call.
func (p *Partition) TxnGuard(pid int64) uint64 {
	p.guards.Lock()
	defer p.guards.Unlock()
	return p.guards.g.markers[pid]
}

// ProduceGuarded is ProduceTraced for the transactional batches of
// producer (pid, epoch) checked with TxnGuard's guard: refused with
// INVALID_TXN_STATE if a marker for pid was proposed since. It ends a
// check ProduceOrCheck asked for.
func (p *Partition) ProduceGuarded(tr Tracer, records []byte, acks int16, pid int64, epoch int16, guard uint64, reply func(ProduceResult)) {
	m := &produceMsg{records: records, acks: acks, reply: reply, tr: tr, guarded: true, guardPID: pid, guardEpoch: epoch, guard: guard}
	p.root.Send(p.pid, m)
}

// ProduceOrCheck takes a transactional batch of producer (pid, epoch)
// whose coordinator is on another node: appended at once if the
// producer's transaction at epoch is known open here and none of its
// batches waits for a check, else needCheck is called (on the actor's
// goroutine, in arrival order; it must not block) with the guard to check
// under, and must end with ProduceGuarded or CheckAbandoned.
func (p *Partition) ProduceOrCheck(tr Tracer, records []byte, acks int16, pid int64, epoch int16, reply func(ProduceResult), needCheck func(guard uint64)) {
	m := &produceMsg{records: records, acks: acks, reply: reply, tr: tr, guardPID: pid, guardEpoch: epoch, needCheck: needCheck}
	p.root.Send(p.pid, m)
}

// CheckAbandoned ends a check ProduceOrCheck asked for whose batch is
// refused (not appended).
func (p *Partition) CheckAbandoned(pid int64) {
	p.root.Send(p.pid, &checkAbandonedMsg{pid: pid})
}

type checkAbandonedMsg struct{ pid int64 }

// term is the replicator's current term (0 without terms: a single node,
// where no batch is checked elsewhere).
func (a *partitionActor) term() int32 {
	if t, ok := a.repl.(interface{ Term() int32 }); ok {
		return t.Term()
	}
	return 0
}

// needsCheck reports whether m, a ProduceOrCheck batch, must be checked
// with its coordinator, and if so counts the check. Actor goroutine.
func (a *partitionActor) needsCheck(m *produceMsg) (guard uint64, check bool) {
	g := &a.p.guards.g
	a.p.guards.Lock()
	defer a.p.guards.Unlock()
	if o, ok := g.open[m.guardPID]; ok && g.checking[m.guardPID] == 0 && o.epoch == m.guardEpoch && o.term == a.term() {
		return 0, false
	}
	if g.checking == nil {
		g.checking = map[int64]int{}
	}
	g.checking[m.guardPID]++
	return g.markers[m.guardPID], true
}

// checkDone ends one check of pid. Actor goroutine.
func (a *partitionActor) checkDone(pid int64) {
	a.p.guards.Lock()
	defer a.p.guards.Unlock()
	if n := a.p.guards.g.checking[pid]; n > 1 {
		a.p.guards.g.checking[pid] = n - 1
	} else {
		delete(a.p.guards.g.checking, pid)
	}
}

// txnProposed records that a checked (or known-open) transactional batch
// of m's producer is proposed. Actor goroutine.
func (a *partitionActor) txnProposed(m *produceMsg) {
	if !m.guarded && m.needCheck == nil {
		return
	}
	a.p.guards.Lock()
	defer a.p.guards.Unlock()
	if a.p.guards.g.open == nil {
		a.p.guards.g.open = map[int64]openTxn{}
	}
	a.p.guards.g.open[m.guardPID] = openTxn{epoch: m.guardEpoch, term: a.term()}
}

// guardHolds reports whether m's guard still holds (always, unguarded).
// Actor goroutine.
func (a *partitionActor) guardHolds(m *produceMsg) bool {
	if !m.guarded {
		return true
	}
	a.p.guards.Lock()
	defer a.p.guards.Unlock()
	return a.p.guards.g.markers[m.guardPID] == m.guard
}

// markerProposed counts a marker of pid. Actor goroutine.
func (a *partitionActor) markerProposed(pid int64) {
	a.p.guards.Lock()
	defer a.p.guards.Unlock()
	if a.p.guards.g.markers == nil {
		a.p.guards.g.markers = map[int64]uint64{}
	}
	a.p.guards.g.markers[pid]++
	delete(a.p.guards.g.open, pid)
}

// guardFailed is the answer to a batch whose transaction ended after it
// was checked.
func guardFailed(pid int64) ProduceResult {
	return ProduceResult{Err: kerr.InvalidTxnState, ErrMessage: fmt.Sprintf("the transaction of producer %d ended on this partition after the batch was checked in it", pid),
		BaseOffset: -1, LogAppendTime: -1, RecordsFree: true}
}
