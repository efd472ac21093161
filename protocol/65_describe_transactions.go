package protocol

// DescribeTransactions: version 0. Each transactional id's state (Kafka's
// names: Empty, Ongoing, PrepareCommit, ...), producer id and epoch,
// timeout, start time (-1: none open) and partitions; an unknown id is
// TRANSACTIONAL_ID_NOT_FOUND. Answered in request order.

import (
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/txn"
)

func init() { register(65, 0, 0, (*Server).describeTransactions) }

func (s *Server) describeTransactions(r *Request) {
	req := r.Msg.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(req.TransactionalIDs))
	var mu sync.Mutex
	pending := 1
	finish := func() {
		mu.Lock()
		pending--
		last := pending == 0
		mu.Unlock()
		if last {
			r.Respond(resp)
		}
	}
	for i, id := range req.TransactionalIDs {
		out := &resp.TransactionStates[i]
		*out = kmsg.NewDescribeTransactionsResponseTransactionState()
		out.TransactionalID = id
		out.ProducerID, out.ProducerEpoch, out.StartTimestamp = -1, -1, -1
		switch {
		case id == "":
			out.ErrorCode = kerr.InvalidRequest.Code
			continue
		case !s.authorized(r, acls.Describe, acls.TransactionalID, id):
			out.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			continue
		case s.txnsFor(id) == nil:
			out.ErrorCode = kerr.CoordinatorNotAvailable.Code
			continue
		}
		mu.Lock()
		pending++
		mu.Unlock()
		s.txnsFor(id).Describe(id, func(t *txn.Txn, err error) {
			if err != nil {
				out.ErrorCode = errorCode(err)
			} else {
				describeTxn(out, t)
			}
			finish()
		})
	}
	finish()
}

func describeTxn(out *kmsg.DescribeTransactionsResponseTransactionState, t *txn.Txn) {
	out.State = t.State.String()
	out.TimeoutMillis = t.TimeoutMs
	out.StartTimestamp = t.StartMs
	out.ProducerID, out.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	byTopic := map[string][]int32{}
	for _, p := range t.Partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.Partition)
	}
	topics := make([]string, 0, len(byTopic))
	for name := range byTopic {
		topics = append(topics, name)
	}
	sort.Strings(topics)
	for _, name := range topics {
		ot := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		ot.Topic, ot.Partitions = name, byTopic[name]
		out.Topics = append(out.Topics, ot)
	}
}
