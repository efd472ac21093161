package partition

import "sync/atomic"

// ProducerBudget bounds the idempotence state every partition of a node
// holds together, counted in producers (a producer on two partitions
// counts twice: each holds its own state, 200 bytes to 1 KiB of RSS).
//
// Producer ids cost a client nothing to make up: a produce with a new one
// adds a producer to the partition, kept until producer.id.expiration.ms
// (a day) after its last batch, so a client sending batches under fresh
// ids grows the broker's memory without bound (KIP-936 describes the same
// hole in Kafka). Over the budget, a partition holding more than its share
// drops its least recently active producers (by the offset of their last
// batch; never one with a transaction open), as a command through the log
// so that every node drops the same ones (evict.go). A producer dropped
// this way is treated as new at its next batch, as one whose state expired
// is: its sequence is accepted as it comes, so only a retry of a batch
// written before the drop could be appended twice.
//
// Safe for concurrent use: every partition actor of the node shares one.
type ProducerBudget struct {
	limit int64
	// total is the producers held by every partition; holders the
	// partitions holding at least one.
	total, holders atomic.Int64
}

// NewProducerBudget returns a budget of limit producers (at least
// minProducerBudget).
func NewProducerBudget(limit int64) *ProducerBudget {
	return &ProducerBudget{limit: max(limit, minProducerBudget)}
}

// minProducerBudget is the smallest budget: a share below a few producers
// a partition would drop live ones at every batch.
const minProducerBudget = 1000

// Limit is the budget in producers.
func (b *ProducerBudget) Limit() int64 { return b.limit }

// Held is the producers every partition holds now.
func (b *ProducerBudget) Held() int64 { return b.total.Load() }

// moved records that a partition went from holding before producers to
// holding after.
func (b *ProducerBudget) moved(before, after int) {
	if b == nil || before == after {
		return
	}
	b.total.Add(int64(after - before))
	switch {
	case before == 0:
		b.holders.Add(1)
	case after == 0:
		b.holders.Add(-1)
	}
}

// keep says how many producers a partition holding count should keep, and
// whether that is fewer than count: only once the node holds more than the
// budget, and only for a partition over its share (the budget over the
// partitions holding any). It then gives up what takes the node back to
// 7/8 of the budget, but keeps 7/8 of its share: a partition with a
// million producers and no rival loses a slice, not its state; a flood
// over many partitions trims each to 7/8 of its share. The 1/8 headroom
// makes passes rare: each frees that much of the partition's share.
func (b *ProducerBudget) keep(count int) (int, bool) {
	if b == nil {
		return count, false
	}
	total := b.total.Load()
	if total <= b.limit {
		return count, false
	}
	share := b.limit / max(1, b.holders.Load())
	if int64(count) <= share {
		return count, false
	}
	excess := total - b.limit*7/8
	keep := max(share*7/8, int64(count)-excess)
	return int(keep), keep < int64(count)
}
