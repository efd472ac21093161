package group

// The verification guard of transactional offsets whose transaction is
// coordinated on another node (coordinators sharded over raft groups).
// There the group coordinator asks the transaction coordinator to check
// a TxnOffsetCommit and stages the offsets itself once it answers; the
// transaction may have ended between the two, its completion (CompleteTxn)
// already applied here, and offsets staged after it would stay pending
// forever or be taken by the producer's next transaction. Kafka's group
// coordinator guards that window as its partition leaders guard
// transactional batches: a token read before the check must still hold
// when the offsets are staged. Here the token counts the completions sent
// for the producer id's bucket; counting and sending happen under one
// lock, so a staging is sent ahead of a completion or refused. A
// completion of another producer in the same bucket refuses a staging
// too: the client retries it (COORDINATOR_LOAD_IN_PROGRESS), and the
// buckets bound the memory whatever the number of producers.

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnGuardBuckets is how many producer-id buckets the guard counts.
const txnGuardBuckets = 1024

// txnEndCounts counts the completions sent per producer-id bucket; its
// lock is held while a completion or a guarded staging is sent.
type txnEndCounts struct {
	sync.Mutex
	n [txnGuardBuckets]uint64
}

func txnGuardBucket(producerID int64) int { return int(uint64(producerID) % txnGuardBuckets) }

// bump counts a completion of producerID; called with the lock held.
func (c *txnEndCounts) bump(producerID int64) { c.n[txnGuardBucket(producerID)]++ }

// TxnGuard is the token to read before a TxnOffsetCommit is checked with
// a transaction coordinator on another node.
func (m *Manager) TxnGuard(producerID int64) uint64 {
	m.txnEnds.Lock()
	defer m.txnEnds.Unlock()
	return m.txnEnds.n[txnGuardBucket(producerID)]
}

// TxnCommitOffsetsGuarded is TxnCommitOffsets for a request whose
// transaction was checked on another node after guard was read: it stages
// the offsets only if no completion of the producer (or of one sharing
// its bucket) was sent since, and otherwise answers every partition
// COORDINATOR_LOAD_IN_PROGRESS, which clients retry (the retry's check
// then finds the transaction as it is).
func (m *Manager) TxnCommitOffsetsGuarded(req *kmsg.TxnOffsetCommitRequest, guard uint64, reply func(*kmsg.TxnOffsetCommitResponse)) {
	m.txnEnds.Lock()
	defer m.txnEnds.Unlock()
	if m.txnEnds.n[txnGuardBucket(req.ProducerID)] != guard {
		reply(TxnOffsetsAnswer(req, kerr.CoordinatorLoadInProgress.Code))
		return
	}
	m.TxnCommitOffsets(req, reply)
}

// TxnOffsetsAnswer answers every partition of req with code.
func TxnOffsetsAnswer(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	for _, rt := range req.Topics {
		ot := kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic, ot.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition, op.ErrorCode = rp.Partition, code
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}
