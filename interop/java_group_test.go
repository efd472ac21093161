package interop_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// member is one Java consumer process of the rebalance test.
type member struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}

	mu       sync.Mutex
	consumed []partOffset // in order
	covered  map[int32]int64
}

type partOffset struct {
	p   int32
	off int64
}

func startMember(t *testing.T, ctx context.Context, lib, addr, group, topic, name string) *member {
	t.Helper()
	src, _ := filepath.Abs(filepath.Join("javaclients", "GroupMember.java"))
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	cmd := exec.CommandContext(ctx, "java", "-Xmx256m", "-Dlog4j2.configurationFile="+log4j, "-cp", filepath.Join(lib, "*"), src, addr, group, topic, name)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{}), covered: map[int32]int64{}}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var kind string
			var p int32
			var off int64
			if n, _ := fmt.Sscanf(sc.Text(), "%s %d %d", &kind, &p, &off); n != 3 {
				continue
			}
			m.mu.Lock()
			switch kind {
			case "C":
				m.consumed = append(m.consumed, partOffset{p, off})
			case "K":
				if off > m.covered[p] {
					m.covered[p] = off
				}
			}
			m.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-m.done })
	return m
}

// TestJavaConsumerGroupRebalance runs three Java consumers in one group,
// kills one with SIGKILL mid-stream, and checks that every record is
// consumed, and that a record is consumed twice only when the member that
// first had it never committed past it (killed, or its commit refused by
// the rebalance).
func TestJavaConsumerGroupRebalance(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, group, partitions, perPhase = "rebalance", "java-group", 6, 1500 // two phases' worth
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	members := []*member{}
	for i := 0; i < 3; i++ {
		members = append(members, startMember(t, ctx, lib, b.Addr, group, topic, fmt.Sprintf("member-%d", i)))
	}
	// Wait until all three members share the group before any record is
	// there, so that each owns partitions when the stream starts.
	waitMembers := func() bool {
		dg, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return false
		}
		g := dg[group]
		return g.State == "Stable" && len(g.Members) == 3
	}
	for !waitMembers() {
		if ctx.Err() != nil {
			t.Fatal("the three Java members never formed a stable group")
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline
	}
	// The stream: 50 records every 20 ms.
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		for i := 0; i < 2*perPhase && ctx.Err() == nil; i += 50 {
			produce(i, 50)
			time.Sleep(20 * time.Millisecond) // pacing the load, not synchronization
		}
	}()

	distinct := func() int {
		seen := map[partOffset]bool{}
		for _, m := range members {
			m.mu.Lock()
			for _, c := range m.consumed {
				seen[c] = true
			}
			m.mu.Unlock()
		}
		return len(seen)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s (%d distinct records consumed)", what, distinct())
			}
			time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
		}
	}
	waitFor("a third of the records", func() bool { return distinct() >= 2*perPhase/3 })
	// Kill the busiest member, mid-stream.
	victim, most := members[0], -1
	for _, m := range members {
		m.mu.Lock()
		n := len(m.consumed)
		m.mu.Unlock()
		if n > most {
			victim, most = m, n
		}
	}
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	<-streamed
	waitFor("every record", func() bool { return distinct() == 2*perPhase })
	for _, m := range members {
		if m != victim {
			_ = m.stdin.Close()
		}
	}
	for _, m := range members {
		select {
		case <-m.done:
		case <-ctx.Done():
			t.Fatalf("%s did not stop", m.name)
		}
	}

	count := map[partOffset]int{}
	uncovered := map[partOffset]bool{}
	for _, m := range members {
		for _, c := range m.consumed {
			count[c]++
			if c.off >= m.covered[c.p] {
				uncovered[c] = true
			}
		}
	}
	dups := 0
	for po, n := range count {
		if n > 1 {
			dups++
			if !uncovered[po] {
				t.Errorf("partition %d offset %d consumed %d times though its first consumer committed past it", po.p, po.off, n)
			}
		}
	}
	var per []string
	for _, m := range members {
		per = append(per, fmt.Sprintf("%s=%d", m.name, len(m.consumed)))
	}
	t.Logf("3 Java consumers, one killed: %d records each consumed, %d reprocessed after the kill or a refused commit; per member: %s",
		len(count), dups, strings.Join(per, " "))
}
