package interop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestSCRAMCredentialsReplicate: on a 3-node raft cluster a SCRAM user
// created through the leader is applied on every node (each node's state
// holds it), is described by the next leader after the first is killed,
// and a change made there reaches the old leader once it is back.
func TestSCRAMCredentialsReplicate(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster: not in -short")
	}
	c := brokertest.StartCluster(t, 3)
	leader := c.WaitLeader(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alter := func(adm *kadm.Client, up []kadm.UpsertSCRAM, del []kadm.DeleteSCRAM) error {
		res, err := adm.AlterUserSCRAMs(ctx, del, up)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	holds := func(n *brokertest.Node, user string) bool {
		raw, err := os.ReadFile(filepath.Join(n.Dir, "state", "meta", "scram-credentials.json"))
		return err == nil && strings.Contains(string(raw), `"user": "`+user+`"`)
	}
	adm := kadm.NewClient(c.Client(t))
	if err := alter(adm, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "a"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "a"},
	}, nil); err != nil {
		t.Fatalf("create alice: %v", err)
	}
	for _, n := range c.Nodes() {
		testwait.For(t, "alice in every node's state", 30*time.Second, func() bool { return holds(n, "alice") })
	}

	c.Kill(leader)
	var next int32
	testwait.For(t, "a new leader", 90*time.Second, func() bool {
		next = c.WaitLeader(t, 90*time.Second)
		return next != leader
	})
	adm2 := kadm.NewClient(c.Client(t))
	testwait.For(t, "alice described after the failover", time.Minute, func() bool {
		d, err := adm2.DescribeUserSCRAMs(ctx, "alice")
		return err == nil && d["alice"].Err == nil && len(d["alice"].CredInfos) == 2
	})
	if err := alter(adm2, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "b"}},
		[]kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}); err != nil {
		t.Fatalf("alter on the new leader %d: %v", next, err)
	}
	c.Restart(leader)
	c.WaitCaughtUp(t, leader, time.Minute)
	old := c.Node(leader)
	testwait.For(t, "bob on the restarted old leader", 30*time.Second, func() bool { return holds(old, "bob") })
	raw, _ := os.ReadFile(filepath.Join(old.Dir, "state", "meta", "scram-credentials.json"))
	if strings.Count(string(raw), `"mechanism"`) != 2 { // alice's SHA-512 and bob's
		t.Errorf("restarted node's credentials:\n%s", raw)
	}
}
