package interop_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterPartitionsLoseNothing: the fault load (faultLoad) runs on a
// separated cluster of 3 (brokertest.StartSeparatedCluster: the network
// between two nodes can be cut, silently, while the clients still reach
// every node) as, in order:
//  1. the leader is cut off from both followers for cutFor, as a commit
//     is sent: the two elect a leader; the old one hears from no majority,
//     steps down, and acknowledges nothing on its own (a fresh client
//     seeded with it alone may get its record acknowledged, by the new
//     leader, at an offset the readers must find); healed, it follows and
//     catches up;
//  2. the leader and one follower are cut apart: the leader keeps a
//     majority with the other follower and the clients carry on; healed,
//     the cut follower catches up;
//  3. a follower is cut off from both others: the clients carry on;
//     healed, it catches up;
//  4. the links flap for flapFor: every 0.5-2 s a new random pattern of
//     cuts (seeded by the fault seed); then all heal and catch up.
//
// A kill -9 or SIGSTOP (TestClusterFaultsLoseNothing) silences a node for
// everyone; here the cut-off leader keeps running and answering clients.
// Then faultLoad.stopAndVerify reads everything back.
func TestClusterPartitionsLoseNothing(t *testing.T) {
	const (
		cutFor  = 10 * time.Second
		flapFor = 20 * time.Second
	)
	skipClusterInShort(t)
	c, links := brokertest.StartSeparatedCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	l := startFaultLoad(t, ctx, c, "part")
	l.steady("load to start")
	t.Logf("load running: %d records acknowledged, %d transactions committed", l.acks(), l.tw.committed())

	// 1. The leader (the transaction coordinator) is cut off from both
	// followers. The timer is the scenario's length, not a
	// synchronization.
	old := c.LeaderID(t)
	l.commitStarts(3 * time.Second)
	at := time.Now()
	links.Isolate(old)
	healAt := time.NewTimer(cutFor)
	defer healAt.Stop()
	// Both are watched from the cut on: the others' election, and the
	// old leader's step-down (it must not go on leading on its own).
	var next int32
	var elected, steppedDown time.Duration
	testwait.For(t, fmt.Sprintf("a leader other than node %d, and node %d to step down", old, old), cutFor, func() bool {
		if elected == 0 {
			if id := c.LeaderNow(); id != 0 && id != old {
				next, elected = id, time.Since(at)
			}
		}
		if steppedDown == 0 {
			if st, err := c.Status(old); err == nil && !st.IsLeader() {
				steppedDown = time.Since(at)
			}
		}
		return elected > 0 && steppedDown > 0
	})
	a0, c0 := l.acks(), l.tw.committed()
	// A client that knows only the cut-off node: it learns the others
	// from that node's metadata, or gets nothing acknowledged.
	probed := probeProduce(t, ctx, []string{c.Node(old).Addr}, l.probeTopic, time.Until(at.Add(cutFor)))
	<-healAt.C
	recordsInCut, txnsInCut := l.acks()-a0, l.tw.committed()-c0
	links.Heal()
	l.figure("leader %d cut off for %v: node %d elected after %v, node %d stepped down after %v; %d records acknowledged and %d transactions committed after that; a client seeded with node %d alone: %s",
		old, cutFor, next, elected.Round(time.Millisecond), old, steppedDown.Round(time.Millisecond), recordsInCut, txnsInCut, old, probeOutcome(probed))
	if recordsInCut == 0 {
		t.Errorf("no idempotent record acknowledged in the %v the leader was cut off, after node %d's election at %v", cutFor, next, elected)
	}
	at = time.Now()
	st := waitSteppedDown(t, c, old)
	c.WaitCaughtUp(t, old, time.Minute)
	l.figure("links healed: node %d follows %d (term %d), caught up after %v", old, st.LeaderID, st.Term, time.Since(at).Round(time.Millisecond))
	l.steady("load after the leader's links healed")

	// 2. The leader and one follower are cut apart.
	leader := c.LeaderID(t)
	follower := otherNode(c, leader)
	at = time.Now()
	links.Cut(leader, follower)
	healAt.Reset(cutFor)
	resumed := l.progress(fmt.Sprintf("clients to carry on with nodes %d and %d cut apart", leader, follower), at, 200, 1)
	<-healAt.C
	during := c.LeaderID(t)
	links.Heal()
	l.figure("leader %d and follower %d cut apart for %v: clients acknowledged and committed after %v; node %d led at the end of the cut",
		leader, follower, cutFor, resumed.Round(time.Millisecond), during)
	at = time.Now()
	for _, id := range c.IDs() {
		c.WaitCaughtUp(t, id, time.Minute)
	}
	l.figure("links healed: every node caught up after %v", time.Since(at).Round(time.Millisecond))
	l.steady("load after the second heal")

	// 3. A follower is cut off from both others.
	leader = c.LeaderID(t)
	follower = otherNode(c, leader)
	at = time.Now()
	links.Isolate(follower)
	healAt.Reset(cutFor)
	resumed = l.progress(fmt.Sprintf("clients to carry on with follower %d cut off", follower), at, 200, 1)
	<-healAt.C
	during = c.LeaderID(t)
	links.Heal()
	l.figure("follower %d cut off for %v: clients acknowledged and committed after %v; node %d led at the end of the cut",
		follower, cutFor, resumed.Round(time.Millisecond), during)
	at = time.Now()
	c.WaitCaughtUp(t, follower, time.Minute)
	l.figure("links healed: node %d caught up after %v", follower, time.Since(at).Round(time.Millisecond))
	l.steady("load after the last heal")

	// 4. Flapping links: for flapFor, every 0.5-2 s the links change to a
	// random pattern (seeded): all healed, one pair cut (the node on both
	// remaining links bridges the other two), one node cut off, or every
	// link cut (no majority anywhere). Then all heal and every node
	// catches up.
	rng := rand.New(rand.NewPCG(l.seed, 4))
	ids := c.IDs()
	at = time.Now()
	var patterns []string
	for time.Since(at) < flapFor {
		links.Heal()
		a := ids[rng.IntN(len(ids))]
		b := ids[(slices.Index(ids, a)+1+rng.IntN(len(ids)-1))%len(ids)]
		switch rng.IntN(4) {
		case 1:
			links.Cut(a, b)
		case 2:
			links.Isolate(a)
		case 3: // no majority anywhere
			for _, id := range ids {
				links.Isolate(id)
			}
		}
		patterns = append(patterns, "["+links.Cuts()+"]")
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond) // the pattern's length, not a synchronization
	}
	links.Heal()
	l.figure("links flapped for %v through %d patterns: %s", time.Since(at).Round(time.Millisecond), len(patterns), strings.Join(patterns, " "))
	at = time.Now()
	resumed = l.progress("clients to carry on after the flapping", at, 200, 1)
	for _, id := range c.IDs() {
		c.WaitCaughtUp(t, id, time.Minute)
	}
	l.figure("links healed: clients acknowledged and committed after %v, every node caught up after %v", resumed.Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
	l.steady("load after the flapping")

	l.stopAndVerify()
	if probed >= 0 {
		probeLog := readLog(t, ctx, c, l.probeTopic, 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		if v, ok := probeLog[0][probed]; !ok || v != "probe" {
			t.Errorf("the probe record acknowledged at offset %d is not there (found %q, %v)", probed, v, ok)
		}
	}
}

// otherNode is the first member in id order that is not id.
func otherNode(c *brokertest.Cluster, id int32) int32 {
	for _, other := range c.IDs() {
		if other != id {
			return other
		}
	}
	return 0
}

func probeOutcome(offset int64) string {
	if offset < 0 {
		return "nothing acknowledged"
	}
	return fmt.Sprintf("acknowledged at offset %d", offset)
}
