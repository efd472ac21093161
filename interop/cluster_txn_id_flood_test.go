package interop_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterTransactionalIDBudget: in a 3-node cluster with
// --max-transactional-ids 200, a client names 1000 transactional ids in
// InitProducerId. The coordinator on the raft leader expires the least
// recently used idle ones early, through the raft log like any expiry, so
// after the leader is killed the new leader's coordinator holds exactly
// the ids the old one did, each under the same producer id.
func TestClusterTransactionalIDBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster: not in -short")
	}
	const budget, ids = 200, 1000
	c := brokertest.StartCluster(t, 3, "--max-transactional-ids", fmt.Sprint(budget))
	c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, kgo.SeedBrokers(c.Seeds()...))
	adm := kadm.NewClient(cl)

	for i := range ids {
		id := fmt.Sprintf("cluster-invented-%04d", i)
		testwait.For(t, "InitProducerId "+id, time.Minute, func() bool {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = &id, 60_000
			resp, err := req.RequestWith(ctx, cl)
			return err == nil && resp.ErrorCode == 0
		})
	}

	// The held ids and their producer ids, as the coordinator's node
	// describes them once every expiry it asked for is written.
	held := func() []string {
		t.Helper()
		var out []string
		testwait.For(t, "the coordinator within its budget", time.Minute, func() bool {
			l, err := adm.ListTransactions(ctx, nil, nil)
			if err != nil {
				return false
			}
			out = out[:0]
			for _, s := range l.Sorted() {
				out = append(out, fmt.Sprintf("%s/%d", s.TxnID, s.ProducerID))
			}
			return len(out) > 0 && len(out) <= budget
		})
		slices.Sort(out)
		return out
	}
	before := held()
	// Stable: no expiry still on its way through the log.
	testwait.For(t, "the held ids settle", time.Minute, func() bool {
		again := held()
		same := slices.Equal(again, before)
		before = again
		return same
	})
	old := c.LeaderID(t)
	c.Kill(old)
	testwait.For(t, "a new leader", time.Minute, func() bool {
		id := c.LeaderID(t)
		return id != 0 && id != old
	})
	after := held()
	if !slices.Equal(before, after) {
		t.Fatalf("the old leader's coordinator held %d ids, the new one %d, or not the same ones", len(before), len(after))
	}
	t.Logf("%d ids named, budget %d: the old and the new leader's coordinator hold the same %d, under the same producer ids", ids, budget, len(after))
}
