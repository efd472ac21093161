package protocol

// The produce path's part in transactions (KIP-890): a transactional batch
// goes to its partition only through the transaction coordinator, which
// checks that the partition is in the producer's open transaction (Produce
// v3-11, part 1) or adds it (Produce v12+, part 2) and then hands the batch
// on from the transaction's actor, ahead of any marker that ends the
// transaction. So a batch can never start a transaction on a partition the
// coordinator does not know of, nor land after the marker that ended its
// transaction: no hanging transactions. The partition actor never waits on
// the coordinator.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/partition"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/storage/recordbatch"
)

// untaggedTransactionalRecords reports whether a produce without a
// transactional id carries transactional batches, which Kafka refuses for
// the whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func untaggedTransactionalRecords(req *kmsg.ProduceRequest) bool {
	if req.TransactionID != nil {
		return false
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if h, err := recordbatch.ParseHeader(rp.Records); err == nil && h.IsTransactional() {
				return true
			}
		}
	}
	return false
}

// appendProduce hands records to p, through the transaction coordinator
// when they are a transactional batch of a transactional produce. done is
// called once.
func (s *Server) appendProduce(req *kmsg.ProduceRequest, topic string, part int32, p *partition.Partition, tr partition.Tracer, records []byte, done func(partition.ProduceResult)) {
	h, err := recordbatch.ParseHeader(records)
	if req.TransactionID == nil || s.txns == nil || err != nil || !h.IsTransactional() {
		// Malformed batches are the partition's to refuse.
		p.ProduceTraced(tr, records, req.Acks, done)
		return
	}
	s.txns.Append(*req.TransactionID, h.ProducerID, h.ProducerEpoch, txn.TopicPartition{Topic: topic, Partition: part}, req.Version >= 12,
		func() { p.ProduceTraced(tr, records, req.Acks, done) },
		func(err error) {
			code, msg := produceTxnError(err)
			done(partition.ProduceResult{Err: code, ErrMessage: msg, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1})
		})
}

// produceTxnError maps the coordinator's refusal to what producers expect
// of a produce, as Kafka's ReplicaManager and AddPartitionsToTxnManager
// map them: a partition not in the transaction is INVALID_TXN_STATE; a
// coordinator that cannot answer now is NOT_ENOUGH_REPLICAS (retriable
// without a metadata refresh); a fenced producer is INVALID_PRODUCER_EPOCH.
func produceTxnError(err error) (*kerr.Error, string) {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError, err.Error()
	}
	switch ke {
	case kerr.InvalidTxnState:
		return ke, "Partition was not added to the transaction"
	case kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable, kerr.NotCoordinator:
		return kerr.NotEnoughReplicas, "Unable to verify the partition has been added to the transaction. Underlying error: " + ke.Message
	case kerr.ProducerFenced:
		return kerr.InvalidProducerEpoch, ""
	}
	return ke, ""
}
