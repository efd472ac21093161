package protocol

// EndTxn: versions 0-5. Commits or aborts the transaction: its state moves
// to PrepareCommit/PrepareAbort on disk, the markers are written, and the
// transaction completes. v5 (KIP-890 part 2) bumps the producer epoch on
// every end and answers the producer id and epoch to use next. Before v2,
// PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH.
//
// Deviation: Kafka answers once the prepare is on disk and writes the
// markers afterwards; Regent answers once the markers are written too (or
// as soon as one fails: the outcome is durable and the markers are retried),
// so a read_committed consumer sees a commit as soon as it is answered.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/txn"
)

func init() { register(26, 0, 5, (*Server).endTxn) }

func (s *Server) endTxn(r *Request) {
	req := r.Msg.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case !s.authorized(r, acls.Write, acls.TransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case s.txnsFor(req.TransactionalID) == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		s.txnsFor(req.TransactionalID).EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version >= 5, func(res txn.Result) {
			resp.ErrorCode = txnErrorCode(res.Err, req.Version >= 2)
			if res.Err == nil {
				resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
			}
			r.Respond(resp)
		})
		return
	}
	r.Respond(resp)
}
