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

// txnGuards counts, per producer id, the markers this partition's actor
// proposed. Written by the actor (a marker), read by TxnGuard from any
// goroutine; the mutex is Partition.guards'. It grows by one entry per
// producer that ends a transaction here while the partition is open.
type txnGuards struct {
	markers map[int64]uint64
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
// producer pid checked with TxnGuard's guard: refused with
// INVALID_TXN_STATE if a marker for pid was proposed since.
func (p *Partition) ProduceGuarded(tr Tracer, records []byte, acks int16, pid int64, guard uint64, reply func(ProduceResult)) {
	m := &produceMsg{records: records, acks: acks, reply: reply, tr: tr, guarded: true, guardPID: pid, guard: guard}
	p.root.Send(p.pid, m)
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
}

// guardFailed is the answer to a batch whose transaction ended after it
// was checked.
func guardFailed(pid int64) ProduceResult {
	return ProduceResult{Err: kerr.InvalidTxnState, ErrMessage: fmt.Sprintf("the transaction of producer %d ended on this partition after the batch was checked in it", pid),
		BaseOffset: -1, LogAppendTime: -1, RecordsFree: true}
}
