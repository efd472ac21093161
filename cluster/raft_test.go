package cluster

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/testwait"
)

// counterCmd appends n to a test applier's list.
type counterCmd struct{ n uint64 }

func (c *counterCmd) CommandKind() string           { return "test.counter" }
func (c *counterCmd) AppendCommand(b []byte) []byte { return binary.AppendUvarint(b, c.n) }

func init() {
	RegisterDecoder("test.counter", func(p []byte) (Command, error) {
		n, w := binary.Uvarint(p)
		if w <= 0 {
			return nil, fmt.Errorf("bad counter")
		}
		return &counterCmd{n: n}, nil
	})
}

// listApplier records applied values and persists them in its state dir,
// so snapshots carry them. async applies on its own goroutine, like an
// actor.
type listApplier struct {
	mu    sync.Mutex
	vals  []uint64
	path  string
	async bool
	ch    chan func()
}

func newListApplier(dir string, async bool) *listApplier {
	a := &listApplier{path: filepath.Join(dir, "list"), async: async, ch: make(chan func(), 1024)}
	if raw, err := os.ReadFile(a.path); err == nil {
		for len(raw) > 0 {
			v, w := binary.Uvarint(raw)
			a.vals = append(a.vals, v)
			raw = raw[w:]
		}
	}
	go func() {
		for f := range a.ch {
			f()
		}
	}()
	return a
}

func (a *listApplier) Apply(cmd Command) any {
	c := cmd.(*counterCmd)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.vals = append(a.vals, c.n)
	f, err := os.OpenFile(a.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _ = f.Write(binary.AppendUvarint(nil, c.n))
	return len(a.vals)
}

func (a *listApplier) ApplyAsync(cmd Command, done func(any)) {
	a.ch <- func() { done(a.Apply(cmd)) }
}

func (a *listApplier) snapshot() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]uint64(nil), a.vals...)
}

type testNode struct {
	r    *Raft
	list *listApplier
	opts RaftOptions
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startNode(t *testing.T, o RaftOptions, async bool) *testNode {
	t.Helper()
	r, err := NewRaft(o)
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{r: r, opts: o, list: newListApplier(o.StateDir, async)}
	if async {
		r.Register("list", asyncOnly{n.list})
	} else {
		r.Register("list", n.list)
	}
	r.Start()
	return n
}

type asyncOnly struct{ *listApplier }

func leaderOf(nodes []*testNode) *testNode {
	for _, n := range nodes {
		if n != nil && n.r.Ready() {
			return n
		}
	}
	return nil
}

func propose(t *testing.T, n *testNode, v uint64) error {
	t.Helper()
	done := make(chan error, 1)
	n.r.Propose("list", &counterCmd{n: v}, func(res any, err error) {
		if err == nil {
			if e, ok := res.(error); ok {
				err = e
			}
		}
		done <- err
	})
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		return fmt.Errorf("proposal %d timed out", v)
	}
}

func TestEntryRoundTrip(t *testing.T) {
	cmds := []entryCommand{{key: "a", kind: "k", payload: []byte("xyz")}, {key: "partition/t/0", kind: "partition.append", trace: "00-abc-def-01", payload: nil}}
	got, err := decodeEntry(encodeEntry(cmds))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].key != "a" || string(got[0].payload) != "xyz" || got[1].trace != "00-abc-def-01" || len(got[1].payload) != 0 {
		t.Fatalf("round trip: %+v", got)
	}
	enc := encodeEntry(cmds)
	for i := 0; i < len(enc); i++ {
		if _, err := decodeEntry(enc[:i]); err == nil {
			t.Fatalf("truncated entry of %d bytes decoded", i)
		}
	}
}

func TestRaftThreeNodesReplicateAndFailOver(t *testing.T) {
	for _, async := range []bool{false, true} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) { testFailover(t, async) })
	}
}

func testFailover(t *testing.T, async bool) {
	base := t.TempDir()
	var peers []Peer
	for i := int32(1); i <= 3; i++ {
		peers = append(peers, Peer{ID: i, Raft: freeAddr(t)})
	}
	opts := func(p Peer) RaftOptions {
		return RaftOptions{Self: p, Peers: peers, Dir: filepath.Join(base, fmt.Sprint(p.ID), "raft"), StateDir: filepath.Join(base, fmt.Sprint(p.ID), "state"), SnapshotThreshold: 50, TrailingLogs: 20}
	}
	nodes := make([]*testNode, 3)
	for i, p := range peers {
		nodes[i] = startNode(t, opts(p), async)
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				_ = n.r.Shutdown()
			}
		}
	}()
	testwait.For(t, "a leader", 15*time.Second, func() bool { return leaderOf(nodes) != nil })
	var acked []uint64
	produce := func(from, to uint64) {
		for v := from; v < to; v++ {
			// Retried until a leader takes it (after a failover).
			testwait.For(t, fmt.Sprintf("value %d to commit", v), 15*time.Second, func() bool {
				l := leaderOf(nodes)
				return l != nil && propose(t, l, v) == nil
			})
			acked = append(acked, v)
		}
	}
	produce(0, 100)
	// Concurrent proposals coalesce into entries and complete in order.
	l := leaderOf(nodes)
	var wg sync.WaitGroup
	results := make([]any, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		i := i
		l.r.Propose("list", &counterCmd{n: uint64(1000 + i)}, func(res any, err error) {
			if err != nil {
				t.Errorf("proposal %d: %v", i, err)
			}
			results[i] = res
			wg.Done()
		})
	}
	wg.Wait()
	for i := 1; i < 200; i++ {
		if results[i].(int) != results[i-1].(int)+1 {
			t.Fatalf("results out of order at %d: %v then %v", i, results[i-1], results[i])
		}
		acked = append(acked, uint64(1000+i-1))
	}
	acked = append(acked, 1199)
	if err := l.r.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// Kill the leader; the others elect a new one and keep the log.
	var killed int
	for i, n := range nodes {
		if n == l {
			killed = i
			_ = n.r.Shutdown()
			nodes[i] = nil
		}
	}
	testwait.For(t, "a new leader", 15*time.Second, func() bool { return leaderOf(nodes) != nil })
	produce(2000, 2100)
	// Restart the killed node from its raft dir: state is rebuilt from the
	// snapshot and the log, then it catches up.
	nodes[killed] = startNode(t, opts(peers[killed]), async)
	want := fmt.Sprint(acked)
	for _, n := range nodes {
		n := n
		testwait.For(t, fmt.Sprintf("node %d to hold every acked value", n.opts.Self.ID), 20*time.Second, func() bool {
			return fmt.Sprint(n.list.snapshot()) == want
		})
	}
}
