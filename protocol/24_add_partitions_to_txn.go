package protocol

// AddPartitionsToTxn: versions 0-5. v0-3 add one transaction's partitions
// (beginning the transaction if none is open); v4+ batch transactions,
// each either adding (v5: the broker-to-broker implicit add of KIP-890
// part 2) or, with VerifyOnly, answering whether each partition is already
// in the transaction (KIP-890 part 1). If any partition is unknown, it
// gets UNKNOWN_TOPIC_OR_PARTITION and the rest of its transaction
// OPERATION_NOT_ATTEMPTED, as Kafka does. Before v2, PRODUCER_FENCED is
// answered as INVALID_PRODUCER_EPOCH.
//
// Deviation: Kafka serves v4+ only to brokers (CLUSTER_ACTION); Regent
// serves it to any client (ACLs are not enforced on it).

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/txn"
)

func init() { register(24, 0, 5, (*Server).addPartitionsToTxn) }

func (s *Server) addPartitionsToTxn(r *Request) {
	req := r.Msg.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	txns := req.Transactions
	if req.Version < 4 {
		txns = []kmsg.AddPartitionsToTxnRequestTransaction{{
			TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		}}
		for _, rt := range req.Topics {
			txns[0].Topics = append(txns[0].Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: rt.Topic, Partitions: rt.Partitions})
		}
	}
	results := make([]kmsg.AddPartitionsToTxnResponseTransaction, len(txns))
	var mu sync.Mutex
	pending := len(txns) + 1
	finish := func() {
		mu.Lock()
		pending--
		last := pending == 0
		mu.Unlock()
		if !last {
			return
		}
		if req.Version >= 4 {
			resp.Transactions = results
		} else {
			for _, rt := range results[0].Topics {
				ot := kmsg.NewAddPartitionsToTxnResponseTopic()
				ot.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					op := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					op.Partition, op.ErrorCode = rp.Partition, rp.ErrorCode
					ot.Partitions = append(ot.Partitions, op)
				}
				resp.Topics = append(resp.Topics, ot)
			}
		}
		r.Respond(resp)
	}
	for i := range txns {
		s.addTxnPartitions(req.Version, &txns[i], &results[i], finish)
	}
	finish()
}

// addTxnPartitions serves one transaction of the request into out and
// calls done once.
func (s *Server) addTxnPartitions(version int16, rt *kmsg.AddPartitionsToTxnRequestTransaction, out *kmsg.AddPartitionsToTxnResponseTransaction, done func()) {
	*out = kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = rt.TransactionalID
	var parts []txn.TopicPartition
	for _, t := range rt.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	// fill answers every partition: codes by index, or one code for all.
	fill := func(codes []int16, all int16) {
		i := 0
		out.Topics = out.Topics[:0]
		for _, t := range rt.Topics {
			ot := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			ot.Topic = t.Topic
			for _, p := range t.Partitions {
				op := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				op.Partition, op.ErrorCode = p, all
				if codes != nil {
					op.ErrorCode = codes[i]
				}
				i++
				ot.Partitions = append(ot.Partitions, op)
			}
			out.Topics = append(out.Topics, ot)
		}
	}
	switch {
	case rt.TransactionalID == "":
		fill(nil, kerr.InvalidRequest.Code)
		done()
		return
	case s.txns == nil:
		fill(nil, kerr.CoordinatorNotAvailable.Code)
		done()
		return
	}
	if codes, ok := s.txnPartitions(parts); !ok {
		fill(codes, 0)
		done()
		return
	}
	fencedKnown := version >= 2
	if rt.VerifyOnly {
		s.txns.VerifyPartitions(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts, func(res txn.Result) {
			if res.Err != nil {
				fill(nil, txnErrorCode(res.Err, fencedKnown))
			} else {
				codes := make([]int16, len(parts))
				for i, err := range res.Partitions {
					codes[i] = txnErrorCode(err, fencedKnown)
				}
				fill(codes, 0)
			}
			done()
		})
		return
	}
	s.txns.AddPartitions(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts, version >= 5, func(res txn.Result) {
		fill(nil, txnErrorCode(res.Err, fencedKnown))
		done()
	})
}
