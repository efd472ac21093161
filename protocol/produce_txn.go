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
	"fmt"

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
			if p := transactionalProducer(rp.Records); p.found {
				return true
			}
		}
	}
	return false
}

// txnProducer is the producer of a partition's transactional batches.
type txnProducer struct {
	id    int64
	epoch int16
	found bool
	// mixed: batches of more than one producer (or epoch) are
	// transactional.
	mixed bool
}

// transactionalProducer walks the batch headers of a partition's records
// (every batch: Regent takes several per partition where Kafka takes one,
// and none may slip past the check). Framing faults end the walk; the
// partition refuses such records whole.
func transactionalProducer(records []byte) txnProducer {
	var p txnProducer
	for len(records) >= recordbatch.HeaderSize {
		h, err := recordbatch.ParseHeader(records)
		size := 12 + int64(h.Length)
		if err != nil || h.Length <= 0 || size > int64(len(records)) {
			break
		}
		if h.IsTransactional() {
			switch {
			case !p.found:
				p.id, p.epoch, p.found = h.ProducerID, h.ProducerEpoch, true
			case h.ProducerID != p.id || h.ProducerEpoch != p.epoch:
				p.mixed = true
			}
		}
		records = records[size:]
	}
	return p
}

// appendProduce hands records to p, through the transaction coordinator
// when they hold transactional batches of a transactional produce. done is
// called once.
func (s *Server) appendProduce(req *kmsg.ProduceRequest, topic string, part int32, p *partition.Partition, tr partition.Tracer, records []byte, done func(partition.ProduceResult)) {
	if req.TransactionID == nil || s.txns == nil {
		// Without a transactional id, untaggedTransactionalRecords has
		// walked the batches already and found none transactional: the
		// records are not walked a second time.
		p.ProduceTraced(tr, records, req.Acks, done)
		return
	}
	prod := transactionalProducer(records)
	if !prod.found {
		p.ProduceTraced(tr, records, req.Acks, done)
		return
	}
	refuse := func(err error) {
		code, msg := produceTxnError(err)
		done(partition.ProduceResult{Err: code, ErrMessage: msg, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1})
	}
	if prod.mixed {
		refuse(fmt.Errorf("%w: Transactional records contained more than one producer ID", kerr.InvalidProducerIDMapping))
		return
	}
	s.txns.Append(*req.TransactionID, prod.id, prod.epoch, txn.TopicPartition{Topic: topic, Partition: part}, req.Version >= 12,
		func() { p.ProduceTraced(tr, records, req.Acks, done) }, refuse)
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
	msg := ""
	if m := kafkaMessage(err); *m != err.Error() {
		msg = *m // a message of our own, not only the code
	}
	switch ke {
	case kerr.InvalidTxnState:
		return ke, "Partition was not added to the transaction"
	case kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable, kerr.NotCoordinator:
		return kerr.NotEnoughReplicas, "Unable to verify the partition has been added to the transaction. Underlying error: " + ke.Message
	case kerr.ProducerFenced:
		return kerr.InvalidProducerEpoch, msg
	}
	return ke, msg
}
