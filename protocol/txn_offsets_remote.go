package protocol

// Transactional offsets whose transaction is coordinated on another node
// (coordinators spread over raft groups, coordinators.go). The client
// sends TxnOffsetCommit to the group's coordinator; the transaction's
// coordinator, elsewhere, checks it (v5: adds the group to the
// transaction) as a node's own TxnOffsetCommit, and the group's
// coordinator then stages the offsets behind its verification guard
// (group.Manager.TxnGuard): a completion of the transaction that reached
// the group since the check began refuses them, retriably, so they never
// land after the marker that ended their transaction. The transaction's
// completion reaches the group through the coordinator's OffsetsSink.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/group"
)

// remoteOffsetsCheckTimeout bounds the transaction coordinator's answer.
const remoteOffsetsCheckTimeout = 15 * time.Second

// txnOffsetsCheckedRemotely checks fwd with the transaction's coordinator
// on another node and stages it here once that answered; answer gets the
// group's response or the error that refused every partition.
func (s *Server) txnOffsetsCheckedRemotely(r *Request, fwd *kmsg.TxnOffsetCommitRequest, answer func(*kmsg.TxnOffsetCommitResponse, error)) {
	groups := s.groupsFor(fwd.Group)
	leader := s.coordinatorView(fwd.TransactionalID).Leader()
	if s.forwarder == nil || leader < 0 {
		answer(nil, kerr.CoordinatorNotAvailable)
		return
	}
	guard := groups.TxnGuard(fwd.ProducerID)
	body := fwd.AppendTo(nil)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), remoteOffsetsCheckTimeout)
		defer cancel()
		raw, _, err := s.forwarder(ctx, leader, ForwardedRequest{Key: fwd.Key(), Version: fwd.Version, ClientID: r.ClientID, Node: true, Body: body})
		if err != nil {
			s.log.Debug("check transactional offsets with the transaction coordinator", "group", fwd.Group, "coordinator", leader, "err", err)
			answer(nil, kerr.CoordinatorLoadInProgress)
			return
		}
		resp := kmsg.NewPtrTxnOffsetCommitResponse()
		resp.SetVersion(fwd.Version)
		if err := resp.ReadFrom(raw); err != nil {
			s.log.Warn("transaction coordinator's TxnOffsetCommit answer does not decode", "coordinator", leader, "err", err)
			answer(nil, kerr.CoordinatorLoadInProgress)
			return
		}
		if code := firstTxnOffsetsCode(resp); code != 0 {
			if code == kerr.NotCoordinator.Code {
				// The transaction's coordinator moved: the client's
				// retry finds where (its group coordinator is still
				// this node, so the retriable code is not NOT_COORDINATOR).
				code = kerr.CoordinatorLoadInProgress.Code
			}
			answer(nil, kerr.ErrorForCode(code))
			return
		}
		groups.TxnCommitOffsetsGuarded(fwd, guard, func(gr *kmsg.TxnOffsetCommitResponse) { answer(gr, nil) })
	}()
}

// firstTxnOffsetsCode is the code of a check's answer (every partition
// gets the same one).
func firstTxnOffsetsCode(resp *kmsg.TxnOffsetCommitResponse) int16 {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// checkTxnOffsets serves a group coordinator's check of a TxnOffsetCommit
// (a node's own request): the transaction must be open with the group in
// it (v5: the group is added), every partition answered alike.
func (s *Server) checkTxnOffsets(r *Request, req *kmsg.TxnOffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse) {
	s.txnsFor(req.TransactionalID).CheckOffsets(req, func(err error) {
		resp.Topics = group.TxnOffsetsAnswer(req, txnErrorCode(err, false)).Topics
		r.Respond(resp)
	})
}
