//go:build !txnwip

// This file is replaced by 22_init_producer_id_txn.go once the Server holds
// the transaction coordinator.

package protocol

// InitProducerId: versions 0-5. Idempotent producers (no transactional id)
// get a fresh producer id at epoch 0 on every call, as Kafka does (a
// KIP-360 epoch bump request for an idempotent producer is answered with a
// new id). Transactional ids are refused with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED until transactions land: the
// response has no message field, so the broker logs why.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(22, 0, 5, (*Server).initProducerID) }

func (s *Server) initProducerID(r *Request) {
	s.async(r, func() kmsg.Response {
		req := r.Msg.(*kmsg.InitProducerIDRequest)
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if req.TransactionalID != nil {
			s.log.Warn("refusing transactional producer: transactions are not supported yet", "transactional_id", *req.TransactionalID, "client_id", r.ClientID)
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp
		}
		id, err := s.pids.Next()
		if err != nil {
			s.log.Error("allocate producer id", "err", err)
			resp.ErrorCode = kerr.UnknownServerError.Code
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = id, 0
		return resp
	})
}
