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
// ACLs: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// for all its partitions), then WRITE on each topic (TOPIC_AUTHORIZATION_FAILED,
// the rest OPERATION_NOT_ATTEMPTED).
//
// Deviation: Kafka serves v4+ only to brokers (CLUSTER_ACTION); Regent
// serves it to any client, with the same checks as v0-3.

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
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
		s.addTxnPartitions(r, &txns[i], &results[i], finish)
	}
	finish()
}

// addTxnPartitions serves one transaction of the request into out and
// calls done once.
func (s *Server) addTxnPartitions(r *Request, rt *kmsg.AddPartitionsToTxnRequestTransaction, out *kmsg.AddPartitionsToTxnResponseTransaction, done func()) {
	version := r.Version
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
	case !s.authorized(r, acls.Write, acls.TransactionalID, rt.TransactionalID):
		fill(nil, kerr.TransactionalIDAuthorizationFailed.Code)
		done()
		return
	case s.txnsFor(rt.TransactionalID) == nil:
		fill(nil, kerr.CoordinatorNotAvailable.Code)
		done()
		return
	}
	if codes, ok := s.txnTopicsAuthorized(r, parts); !ok {
		fill(codes, 0)
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
		s.txnsFor(rt.TransactionalID).VerifyPartitions(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts, func(res txn.Result) {
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
	s.txnsFor(rt.TransactionalID).AddPartitions(rt.TransactionalID, rt.ProducerID, rt.ProducerEpoch, parts, version >= 5, func(res txn.Result) {
		fill(nil, txnErrorCode(res.Err, fencedKnown))
		done()
	})
}

// txnTopicsAuthorized checks WRITE on each partition's topic: partitions of
// a topic the principal may not write get TOPIC_AUTHORIZATION_FAILED and,
// if there are any, the rest OPERATION_NOT_ATTEMPTED, as Kafka answers.
func (s *Server) txnTopicsAuthorized(r *Request, parts []txn.TopicPartition) (codes []int16, ok bool) {
	if s.authz == nil {
		return nil, true
	}
	codes = make([]int16, len(parts))
	ok = true
	checked := map[string]bool{}
	for i, p := range parts {
		allowed, seen := checked[p.Topic]
		if !seen {
			allowed = s.authorized(r, acls.Write, acls.Topic, p.Topic)
			checked[p.Topic] = allowed
		}
		if !allowed {
			codes[i] = kerr.TopicAuthorizationFailed.Code
			ok = false
		}
	}
	if !ok {
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
	}
	return codes, ok
}
