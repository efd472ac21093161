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
	"context"
	"errors"
	"fmt"
	"time"

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
	if req.TransactionID == nil || s.txnsFor(*req.TransactionID) == nil {
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
	if s.remoteCoordinator(*req.TransactionID) {
		// Checked only when the producer's transaction is not known open
		// on the partition (partition.ProduceOrCheck), as Kafka checks.
		p.ProduceOrCheck(tr, records, req.Acks, prod.id, prod.epoch, done, func(guard uint64) {
			s.appendCheckedRemotely(req, topic, part, p, tr, records, prod, guard, done, refuse)
		})
		return
	}
	s.txnsFor(*req.TransactionID).Append(*req.TransactionID, prod.id, prod.epoch, txn.TopicPartition{Topic: topic, Partition: part}, req.Version >= 12,
		func() { p.ProduceTraced(tr, records, req.Acks, done) }, refuse)
}

// remoteCoordinator reports whether the transaction coordinator that must
// check a transactional batch of transactional id tid is on another node:
// the cluster runs partition raft groups (this node leads the batch's
// partition), and the raft group coordinating tid is led elsewhere.
func (s *Server) remoteCoordinator(tid string) bool {
	return s.cfg.PartitionGroups && !s.coordinatorView(tid).Serving()
}

// remoteTxnCheckTimeout bounds the coordinator's answer to a remote check.
const remoteTxnCheckTimeout = 15 * time.Second

// appendCheckedRemotely asks the transaction coordinator, on another
// node, to check (Produce v3-11) or add (v12+) the partition in
// the producer's transaction, as Kafka's partition leaders do with
// AddPartitionsToTxn v4+, and appends the batch once it has: guarded, so
// that a marker written here since the check began refuses it
// (guard, partition.TxnGuard). A coordinator that cannot be reached
// answers NOT_ENOUGH_REPLICAS (the producer retries). Called by the
// partition's actor in arrival order (ProduceOrCheck's needCheck); the
// check ends with ProduceGuarded or CheckAbandoned.
func (s *Server) appendCheckedRemotely(req *kmsg.ProduceRequest, topic string, part int32, p *partition.Partition, tr partition.Tracer, records []byte, prod txnProducer, guard uint64, done func(partition.ProduceResult), refuse func(error)) {
	leader := s.coordinatorView(*req.TransactionID).Leader()
	if s.forwarder == nil || leader < 0 {
		p.CheckAbandoned(prod.id)
		refuse(kerr.CoordinatorNotAvailable)
		return
	}
	key := remoteTxnKey{topic, part, prod.id}
	slot := s.remoteTxns.enqueue(key)
	// In arrival order, whatever order the checks answer in.
	answer := refuse
	refuse = func(err error) {
		s.remoteTxns.complete(key, slot, func() {
			p.CheckAbandoned(prod.id)
			answer(err)
		})
	}
	check := kmsg.NewPtrAddPartitionsToTxnRequest()
	check.SetVersion(5)
	ct := kmsg.NewAddPartitionsToTxnRequestTransaction()
	ct.TransactionalID, ct.ProducerID, ct.ProducerEpoch, ct.VerifyOnly = *req.TransactionID, prod.id, prod.epoch, req.Version < 12
	ctt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	ctt.Topic, ctt.Partitions = topic, []int32{part}
	ct.Topics = append(ct.Topics, ctt)
	check.Transactions = append(check.Transactions, ct)
	body := check.AppendTo(nil)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), remoteTxnCheckTimeout)
		defer cancel()
		raw, _, err := s.forwarder(ctx, leader, ForwardedRequest{Key: check.Key(), Version: 5, Node: true, Body: body})
		if err != nil {
			s.log.Debug("check a transactional batch with the coordinator", "topic", topic, "partition", part, "coordinator", leader, "err", err)
			refuse(kerr.CoordinatorNotAvailable)
			return
		}
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		resp.SetVersion(5)
		if err := resp.ReadFrom(raw); err != nil {
			refuse(fmt.Errorf("%w: the coordinator's answer: %v", kerr.CoordinatorNotAvailable, err))
			return
		}
		code := kerr.CoordinatorNotAvailable.Code
		if resp.ErrorCode != 0 {
			code = resp.ErrorCode
		}
		for _, rt := range resp.Transactions {
			for _, rtt := range rt.Topics {
				for _, rp := range rtt.Partitions {
					if rtt.Topic == topic && rp.Partition == part {
						code = rp.ErrorCode
					}
				}
			}
		}
		if err := kerr.ErrorForCode(code); err != nil {
			refuse(err)
			return
		}
		s.remoteTxns.complete(key, slot, func() { p.ProduceGuarded(tr, records, req.Acks, prod.id, prod.epoch, guard, done) })
	}()
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
