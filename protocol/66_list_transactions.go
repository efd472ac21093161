package protocol

// ListTransactions: versions 0-2. Filters by state (unknown state names
// are echoed in UnknownStateFilters and match nothing), producer id, v1's
// duration (transactions running longer than DurationFilterMillis; -1:
// any) and v2's transactional id pattern (RE2, matching the whole id; an
// invalid one is INVALID_REGULAR_EXPRESSION). Dead ids are never listed.
// A node lists the ids it coordinates (every shard it leads,
// coordinators.go), as a Kafka broker does.

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/txn"
)

func init() { register(66, 0, 2, (*Server).listTransactions) }

func (s *Server) listTransactions(r *Request) {
	req := r.Msg.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	coords := s.allTxns()
	if len(coords) == 0 {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.Respond(resp)
		return
	}
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters}
	for _, name := range req.StateFilters {
		if st, ok := txn.ParseState(name); ok {
			f.States = append(f.States, st)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		r.Respond(resp) // only unknown states: nothing matches
		return
	}
	if req.Version >= 1 && req.DurationFilterMillis >= 0 {
		f.ByDuration, f.RunningLongerThanMs, f.NowMs = true, req.DurationFilterMillis, time.Now().UnixMilli()
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			r.Respond(resp)
			return
		}
		f.Pattern = re
	}
	var listed []txn.Summary
	for _, c := range coords {
		listed = append(listed, c.List(f)...)
	}
	slices.SortFunc(listed, func(a, b txn.Summary) int { return strings.Compare(a.ID, b.ID) })
	for _, sum := range listed {
		// Kafka lists only the ids the principal may describe.
		if !s.authorizedQuiet(r, acls.Describe, acls.TransactionalID, sum.ID) {
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = sum.ID, sum.ProducerID, sum.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	r.Respond(resp)
}
