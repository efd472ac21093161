package protocol

// AddOffsetsToTxn: versions 0-4. Adds a consumer group to the transaction
// (beginning it if none is open), so that the TxnOffsetCommits that follow
// are committed or dropped with it. Before v2, PRODUCER_FENCED is answered
// as INVALID_PRODUCER_EPOCH.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/txn"
)

func init() { register(25, 0, 4, (*Server).addOffsetsToTxn) }

func (s *Server) addOffsetsToTxn(r *Request) {
	req := r.Msg.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case !s.authorized(r, acls.Write, acls.TransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.authorized(r, acls.Read, acls.Group, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case s.txnsFor(req.TransactionalID) == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		s.txnsFor(req.TransactionalID).AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, func(res txn.Result) {
			resp.ErrorCode = txnErrorCode(res.Err, req.Version >= 2)
			r.Respond(resp)
		})
		return
	}
	r.Respond(resp)
}
