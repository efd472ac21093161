package partition

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/regent-broker/regent/actors/replication"
)

// kindEvict names the replicated producer-eviction pass (part of the raft
// log's format: never renamed).
const kindEvict = "partition.evict_producers"

func init() { replication.RegisterDecoder(kindEvict, decodeEvict) }

// evictCmd is the replicated form of an eviction pass: the leader finds
// its node over the producer budget (ProducerBudget.keep) and proposes
// how many producers the partition keeps; every node drops the same ones
// (State.EvictProducers), whatever its own budget. Followers never evict
// on their own.
type evictCmd struct {
	keep int64
}

const evictLen = 8

// evictResult is the outcome of applying an evictCmd.
type evictResult struct{ evicted int }

// CommandKind implements replication.Encodable.
func (c *evictCmd) CommandKind() string { return kindEvict }

// AppendCommand implements replication.Encodable.
func (c *evictCmd) AppendCommand(b []byte) []byte {
	b = slices.Grow(b, 1+evictLen)
	b = append(b, commandVersion)
	return binary.BigEndian.AppendUint64(b, uint64(c.keep))
}

func decodeEvict(p []byte) (replication.Command, error) {
	body, err := commandBody(p, evictLen, false)
	if err != nil {
		return nil, err
	}
	c := &evictCmd{keep: int64(binary.BigEndian.Uint64(body))}
	if c.keep < 0 {
		return nil, errors.New("producer eviction keeping a negative count")
	}
	return c, nil
}

// ProducerCount is how many producers the partition holds state for.
func (s *State) ProducerCount() int { return s.producers.len() }

// EvictProducers drops the state of the least recently active producers
// until keep are left, or until only producers with a transaction open
// here are (those stay), and returns how many it dropped. Least recently
// active: by the first offset of the last batch remembered of each (-1:
// none), then by id, which the state alone decides. A command: every node
// runs it at the same point of the log with the same keep.
func (s *State) EvictProducers(keep int) int {
	n := s.producers.len() - max(keep, 0)
	if n <= 0 {
		return 0
	}
	type candidate struct {
		last, pid int64
		ref       producerRef
	}
	cands := make([]candidate, 0, s.producers.len())
	s.producers.each(func(e *producerEntry) {
		if e.txnFirstOffset >= 0 {
			return
		}
		last := int64(-1)
		if e.nBatches > 0 {
			last = e.batches[e.nBatches-1].firstOffset
		}
		cands = append(cands, candidate{last, e.pid, e.self})
	})
	if n < len(cands) {
		slices.SortFunc(cands, func(a, b candidate) int {
			return cmp.Or(cmp.Compare(a.last, b.last), cmp.Compare(a.pid, b.pid))
		})
		cands = cands[:n]
	}
	for _, c := range cands {
		s.expiry.unlink(&s.producers.slab, s.producers.slab.at(c.ref))
		s.producers.del(c.pid)
	}
	if len(cands) > 0 {
		s.shrinkProducers()
		s.changes++
	}
	return len(cands)
}

// evict applies a pass. Actor goroutine.
func (a *partitionActor) evict(c *evictCmd) evictResult {
	n := a.sl.st.EvictProducers(int(c.keep))
	if n > 0 {
		a.logger.Info("producer state dropped: the node is over its producer budget", "producers", n, "kept", a.sl.st.ProducerCount())
		// Not in the partition's log, as an expiry pass is not: a restart
		// from an older snapshot would bring the dropped producers back.
		a.snapshot()
	}
	return evictResult{evicted: n}
}

// proposeEviction proposes an eviction pass when the node is over its
// producer budget and this partition over its share (leader only; see
// evictCmd), one in flight at a time. With Local it is applied inside
// Propose, on this goroutine.
func (a *partitionActor) proposeEviction() {
	if a.budget == nil || a.evicting.Load() {
		return
	}
	keep, ok := a.budget.keep(a.sl.st.ProducerCount())
	if !ok {
		return
	}
	proposePass[evictResult](a, &a.evicting, &evictCmd{keep: int64(keep)}, "producer eviction")
}

// noteProducers brings the budget up to date with the producers the
// partition holds. Actor goroutine (and Open, before the actor runs).
func (a *partitionActor) noteProducers() {
	if a.closed {
		return // close gave its count back
	}
	n := a.sl.st.ProducerCount()
	a.budget.moved(a.held, n)
	a.held = n
}
