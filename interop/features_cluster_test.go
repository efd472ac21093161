package interop_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// nodeFeatures asks one node (and only it) for ApiVersions v4 and returns
// its finalized transaction.version and epoch; ok is false when the node
// did not answer.
func nodeFeatures(ctx context.Context, addr string) (level int16, epoch int64, ok bool) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, 0, false
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return 0, 0, false
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	req.ClientSoftwareName, req.ClientSoftwareVersion = "regent-interop", "1"
	resp, err := req.RequestWith(rctx, seeds[0])
	if err != nil || resp.ErrorCode != 0 {
		return 0, 0, false
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			level = f.MaxVersionLevel
		}
	}
	return level, resp.FinalizedFeaturesEpoch, true
}

// updateTxnVersion sends UpdateFeatures for transaction.version to one node.
func updateTxnVersion(ctx context.Context, addr string, level int16, upgradeType int8) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", level, upgradeType
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		return fmt.Errorf("%w: %s", err, msg)
	}
	return nil
}

// TestClusterFeaturesReplicated: a feature change made on the raft leader
// is a replicated command: every node's ApiVersions then reports the same
// level and epoch; after the leader is killed the new leader still has
// it and takes the next change; the killed node, restarted, catches up to
// that one too.
func TestClusterFeaturesReplicated(t *testing.T) {
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	every := func(ids []int32, level int16, epoch int64) {
		t.Helper()
		for _, id := range ids {
			addr := c.Node(id).Addr
			testwait.For(t, fmt.Sprintf("node %d reports transaction.version %d at epoch %d", id, level, epoch), time.Minute, func() bool {
				l, e, ok := nodeFeatures(ctx, addr)
				return ok && l == level && e == epoch
			})
		}
	}
	every(c.IDs(), 2, 0)

	// update retries only what was surely not applied (NOT_CONTROLLER: a
	// leader not yet serving), so the epoch counts every change once.
	update := func(id int32, level int16, upgradeType int8) {
		t.Helper()
		testwait.For(t, fmt.Sprintf("node %d takes transaction.version=%d", id, level), time.Minute, func() bool {
			err := updateTxnVersion(ctx, c.Node(id).Addr, level, upgradeType)
			if err != nil && !errors.Is(err, kerr.NotController) {
				t.Fatalf("UpdateFeatures on node %d: %v", id, err)
			}
			return err == nil
		})
	}
	first := c.LeaderID(t)
	update(first, 1, 2)
	every(c.IDs(), 1, 1)

	c.Kill(first)
	second := c.WaitLeader(t, time.Minute)
	if second == first {
		t.Fatalf("node %d still leads after its kill", first)
	}
	every(c.LiveIDs(), 1, 1)
	update(second, 2, 1)
	every(c.LiveIDs(), 2, 2)

	c.Restart(first)
	c.WaitCaughtUp(t, first, time.Minute)
	every(c.IDs(), 2, 2)
}
