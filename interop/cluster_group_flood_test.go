package interop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterGroupFloodIsBoundedPerNode: with coordinators spread over 3
// raft groups and --max-groups 300, each group's coordinator holds a third
// of the budget, so the cluster takes 300 invented groups in all (not 300
// per coordinator, which let a node leading every group hold three times
// the flag) and refuses the rest with POLICY_VIOLATION.
func TestClusterGroupFloodIsBoundedPerNode(t *testing.T) {
	skipClusterInShort(t)
	const budget, shards, flood = 300, 3, 1500
	c := brokertest.StartCluster(t, 3, "--raft-groups", fmt.Sprint(shards), "--max-groups", fmt.Sprint(budget))
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	cl := newClusterClient(t, c)
	adm := kadm.NewClient(cl)
	const topic = "cluster-group-flood"
	created, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	c.WaitTopic(t, topic, 1, 3, time.Minute)

	accepted, refused := 0, 0
	for i := range flood {
		group := fmt.Sprintf("cluster-invented-%05d", i)
		var code int16
		testwait.For(t, "OffsetCommit for "+group+" answered", time.Minute, func() bool {
			resp, err := inventedGroupCommit(group, topic, created.ID).RequestWith(ctx, cl)
			if err != nil {
				return false
			}
			code = resp.Topics[0].Partitions[0].ErrorCode
			// A coordinator still starting or moving: asked again.
			return !kerr.IsRetriable(kerr.ErrorForCode(code))
		})
		switch code {
		case 0:
			accepted++
		case kerr.PolicyViolation.Code:
			refused++
		default:
			t.Fatalf("commit for %s: %v", group, kerr.ErrorForCode(code))
		}
	}
	t.Logf("%d invented groups over %d coordinators: %d accepted, %d refused with POLICY_VIOLATION (--max-groups %d)", flood, shards, accepted, refused, budget)
	if accepted != budget || refused != flood-budget {
		t.Fatalf("%d accepted and %d refused, want %d and %d: each of %d coordinators holds %d", accepted, refused, budget, flood-budget, shards, budget/shards)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != budget {
		t.Fatalf("%d groups listed over the cluster, want %d", len(listed), budget)
	}
}
