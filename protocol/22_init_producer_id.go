package protocol

// InitProducerId: versions 0-6. Idempotent producers (no transactional id)
// get a fresh producer id at epoch 0 on every call, as Kafka does (a
// KIP-360 epoch bump request for an idempotent producer is answered with a
// new id). Transactional ids go to the transaction coordinator: epoch 0 for
// a new id, the next epoch (fencing the previous producer) otherwise, and
// KIP-360's ProducerID/ProducerEpoch (v3+) recognise a retried bump. An
// open transaction is aborted first and CONCURRENT_TRANSACTIONS answered
// (the client retries); a timeout above the broker's maximum is
// INVALID_TRANSACTION_TIMEOUT. Before v4, PRODUCER_FENCED is answered as
// INVALID_PRODUCER_EPOCH, as Kafka does for clients that predate it.
//
// v6 (KIP-939, two-phase commit; init_producer_id_v6.go): Regent does not
// support 2PC, so it answers as Kafka 4.3 does with
// transaction.two.phase.commit.enable off: Enable2Pc is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED and KeepPreparedTxn
// UNSUPPORTED_VERSION (Kafka 4.3 refuses it whatever its configuration).
// Ordinary v6 requests are served as v5's; OngoingTxnProducerId and
// OngoingTxnProducerEpoch are -1, as Kafka answers when no prepared
// transaction is kept. Both flags are ignored for idempotent producers,
// as Kafka ignores them there. Kafka 4.3.1 marks v6 unstable: its broker
// advertises it only with unstable.api.versions.enable, and its Java
// client caps InitProducerId at v5 (InitProducerIdRequest.Builder allows
// 0-5), so that client still sends v5 here; v6 is for clients that send it.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/txn"
	"github.com/regent-broker/regent/cluster"
)

func init() { register(22, 0, 6, (*Server).initProducerID) }

func (s *Server) initProducerID(r *Request) {
	req := r.Msg.(*initProducerIDRequest)
	if req.TransactionalID != nil {
		s.initTransactionalProducer(r, req)
		return
	}
	// Kafka 4's rule for idempotent producers: IDEMPOTENT_WRITE on the
	// cluster, or WRITE on some topic.
	if s.authz != nil && !s.authorizedQuiet(r, acls.IdempotentWrite, acls.Cluster, acls.ClusterName) && !s.authorizedAny(r, acls.Write, acls.Topic) {
		resp := req.ResponseKind().(*initProducerIDResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	s.async(r, func() kmsg.Response {
		resp := req.ResponseKind().(*initProducerIDResponse)
		pids := s.pids
		if s.nodePIDs != nil && !s.cluster.Serving() {
			// Any node serves idempotent producers, as any Kafka broker
			// does; the Java client cannot retry this elsewhere (it looks
			// up a coordinator for a null transactional id).
			pids = s.nodePIDs
		}
		id, err := pids.Next()
		if err != nil {
			// A follower cannot allocate ids: COORDINATOR_NOT_AVAILABLE is
			// retriable for every client, which then tries another node.
			resp.ErrorCode = kerr.UnknownServerError.Code
			if errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrOutcomeUnknown) {
				resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			} else {
				s.log.Error("allocate producer id", "err", err)
			}
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return resp
	})
}

func (s *Server) initTransactionalProducer(r *Request, req *initProducerIDRequest) {
	resp := req.ResponseKind().(*initProducerIDResponse)
	var expected *txn.ProducerIDAndEpoch
	if req.Version >= 3 {
		switch noID, noEpoch := req.ProducerID == -1, req.ProducerEpoch == -1; {
		case noID && noEpoch:
		case noID || noEpoch:
			resp.ErrorCode = kerr.InvalidRequest.Code
			r.Respond(resp)
			return
		default:
			expected = &txn.ProducerIDAndEpoch{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch}
		}
	}
	switch {
	case *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case !s.authorized(r, acls.Write, acls.TransactionalID, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case req.Enable2PC:
		// Kafka's answer when 2PC is not enabled for the id (its
		// TWO_PHASE_COMMIT ACL check, first, answers the same code).
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		s.log.Info("InitProducerId with enable2Pc refused: Regent does not support two-phase commit (KIP-939)",
			"transactional_id", *req.TransactionalID, "client", r.ClientID)
	case req.KeepPreparedTxn:
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	case s.txnsFor(*req.TransactionalID) == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		s.txnsFor(*req.TransactionalID).InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, expected, func(res txn.Result) {
			resp.ErrorCode = txnErrorCode(res.Err, req.Version >= 4)
			if res.Err == nil {
				resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
			}
			r.Respond(resp)
		})
		return
	}
	r.Respond(resp)
}

// txnErrorCode maps a coordinator error to Kafka's code; a request version
// that predates PRODUCER_FENCED (KIP-588) gets INVALID_PRODUCER_EPOCH.
func txnErrorCode(err error, fencedKnown bool) int16 {
	code := errorCode(err)
	if code == kerr.ProducerFenced.Code && !fencedKnown {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// txnPartitions validates a transaction's partitions: unknown ones get
// UNKNOWN_TOPIC_OR_PARTITION and, if there are any, the rest
// OPERATION_NOT_ATTEMPTED (Kafka refuses the whole request then). codes
// is indexed like parts.
func (s *Server) txnPartitions(parts []txn.TopicPartition) (codes []int16, ok bool) {
	codes = make([]int16, len(parts))
	ok = true
	for i, p := range parts {
		t := s.topics.Get(p.Topic)
		if t == nil || p.Partition < 0 || int(p.Partition) >= len(t.Partitions) {
			codes[i] = kerr.UnknownTopicOrPartition.Code
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
