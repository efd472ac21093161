package topics

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/storage/logconfig"
)

// fakeRaft is an asynchronous replicator shared by several nodes, as raft
// would be: Propose on the leader encodes the command and returns at once;
// one goroutine (the "FSM") decodes it anew for every node, applies it on
// each node's applier in log order, then calls done with the leader's
// result. Propose on another node fails with cluster.ErrNotLeader.
type fakeRaft struct {
	queue chan fakeEntry
	wg    sync.WaitGroup

	mu     sync.Mutex
	nodes  []*fakeNode
	leader *fakeNode
	log    []fakeEntry // every committed entry, for replay
}

type fakeEntry struct {
	key, kind string
	payload   []byte
	from      *fakeNode
	done      func(any, error)
}

type fakeNode struct {
	raft     *fakeRaft
	mu       sync.Mutex
	appliers map[string]cluster.Applier
}

func newFakeRaft(t *testing.T, n int) *fakeRaft {
	f := &fakeRaft{queue: make(chan fakeEntry, 1024)}
	for range n {
		f.nodes = append(f.nodes, &fakeNode{raft: f, appliers: map[string]cluster.Applier{}})
	}
	f.leader = f.nodes[0]
	f.wg.Add(1)
	go f.run()
	t.Cleanup(func() { close(f.queue); f.wg.Wait() })
	return f
}

func (f *fakeRaft) run() {
	defer f.wg.Done()
	for e := range f.queue {
		f.mu.Lock()
		f.log = append(f.log, e)
		nodes := append([]*fakeNode(nil), f.nodes...)
		f.mu.Unlock()
		var leaderRes any
		var leaderErr error
		for _, n := range nodes {
			cmd, err := cluster.DecodeCommand(e.kind, e.payload)
			if err != nil {
				leaderErr = err
				continue
			}
			n.mu.Lock()
			a := n.appliers[e.key]
			n.mu.Unlock()
			if a == nil {
				continue
			}
			// No fake lock is held: Apply registers partition appliers.
			res := a.Apply(cmd)
			if n == e.from {
				leaderRes = res
			}
		}
		e.done(leaderRes, leaderErr)
	}
}

func (f *fakeRaft) committed() []fakeEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeEntry(nil), f.log...)
}

func (n *fakeNode) Register(key string, a cluster.Applier) {
	n.mu.Lock()
	n.appliers[key] = a
	n.mu.Unlock()
}

func (n *fakeNode) Unregister(key string) {
	n.mu.Lock()
	delete(n.appliers, key)
	n.mu.Unlock()
}

func (n *fakeNode) Propose(key string, cmd cluster.Command, done func(any, error)) {
	n.raft.mu.Lock()
	leader := n.raft.leader == n
	n.raft.mu.Unlock()
	if !leader {
		done(nil, fmt.Errorf("propose %s: %w", key, cluster.ErrNotLeader))
		return
	}
	kind, payload, err := cluster.EncodeCommand(cmd)
	if err != nil {
		done(nil, err)
		return
	}
	n.raft.queue <- fakeEntry{key: key, kind: kind, payload: payload, from: n, done: done}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openWith(t *testing.T, dir string, repl cluster.Replicator) *Registry {
	t.Helper()
	r, err := Open(Options{DataDir: dir, Root: actor.NewActorSystem().Root, Repl: repl, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sameTopics fails unless a and b hold the same topics, ids, partition
// counts, configs and broker overrides.
func sameTopics(t *testing.T, what string, a, b *Registry) {
	t.Helper()
	la, lb := a.List(), b.List()
	if len(la) != len(lb) {
		t.Fatalf("%s: %d topics vs %d", what, len(la), len(lb))
	}
	for i := range la {
		x, y := la[i], lb[i]
		if x.Name != y.Name || x.ID != y.ID || len(x.Partitions) != len(y.Partitions) || x.Config != y.Config || fmt.Sprint(x.Configs) != fmt.Sprint(y.Configs) {
			t.Fatalf("%s: topic differs:\n%+v\n%+v", what, x, y)
		}
		if b.GetByID(x.ID) == nil {
			t.Fatalf("%s: topic %s not found by id", what, x.Name)
		}
	}
	if fmt.Sprint(a.Broker().Overrides) != fmt.Sprint(b.Broker().Overrides) {
		t.Fatalf("%s: broker overrides %v vs %v", what, a.Broker().Overrides, b.Broker().Overrides)
	}
}

func TestReplicatedRegistry(t *testing.T) {
	f := newFakeRaft(t, 2)
	leaderDir, followerDir := t.TempDir(), t.TempDir()
	l := openWith(t, leaderDir, f.nodes[0])
	defer l.Close()
	fl := openWith(t, followerDir, f.nodes[1])

	ten := "10000"
	a, err := l.Create(CreateSpec{Name: "a", Partitions: 3, ReplicationFactor: 1, Configs: map[string]*string{"retention.ms": &ten}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "a" || len(a.Partitions) != 3 || a.Config.RetentionMs != 10000 || l.Get("a") != a {
		t.Fatalf("created %+v", a)
	}
	if _, err := l.Create(CreateSpec{Name: "b", Partitions: -1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	oldB := l.Get("b").ID
	if _, err := l.Create(CreateSpec{Name: "a", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate: %v", err)
	}
	// A create that passed validation before another one committed: Apply
	// refuses it, alike on every node.
	res := make(chan any, 1)
	f.nodes[0].Propose(replKey, &createCmd{Name: "a", ID: [16]byte{1}, Partitions: 1, Configs: map[string]string{}}, func(r any, err error) {
		if err != nil {
			r = err
		}
		res <- r
	})
	if err, _ := (<-res).(error); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("racing create: %v", err)
	}
	before := len(f.committed())
	if _, err := l.Create(CreateSpec{Name: "v", Partitions: 2, ReplicationFactor: 1, ValidateOnly: true}); err != nil || l.Get("v") != nil {
		t.Fatalf("validate only: %v", err)
	}
	if err := l.AddPartitions("a", 9, nil, true); err != nil {
		t.Fatal(err)
	}
	if len(f.committed()) != before {
		t.Fatal("a validate-only request was proposed")
	}
	if err := l.AddPartitions("a", 5, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := l.AddPartitions("a", 2, nil, false); !errors.Is(err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %v", err)
	}
	if err := l.SetConfigs("a", map[string]string{"retention.ms": "20000"}, false); err != nil {
		t.Fatal(err)
	}
	if err := l.SetBroker(logconfig.Broker{Overrides: map[string]string{"log.retention.ms": "5000"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if err := l.Delete("b"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete twice: %v", err)
	}
	// Re-created under a new id: replaying the old delete must spare it.
	if _, err := l.Create(CreateSpec{Name: "b", Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if l.Get("b").ID == oldB {
		t.Fatal("re-created topic kept its old id")
	}

	got := l.Get("a")
	if len(got.Partitions) != 5 || got.Config.RetentionMs != 20000 || l.Get("b").Config.RetentionMs != 5000 {
		t.Fatalf("leader state: a=%+v b=%+v", got, l.Get("b"))
	}
	sameTopics(t, "follower", l, fl)

	// The follower refuses changes: the client must go to the controller.
	if _, err := fl.Create(CreateSpec{Name: "c", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, kerr.NotController) {
		t.Fatalf("create on follower: %v", err)
	}
	for what, err := range map[string]error{
		"delete":         fl.Delete("a"),
		"add partitions": fl.AddPartitions("a", 6, nil, false),
		"set configs":    fl.SetConfigs("a", map[string]string{}, false),
		"set broker":     fl.SetBroker(logconfig.Broker{}),
	} {
		var te *Error
		if !errors.Is(err, kerr.NotController) || !errors.As(err, &te) || te.Msg == "" {
			t.Fatalf("%s on follower: %v", what, err)
		}
	}
	if fl.Get("c") != nil || len(fl.Get("a").Partitions) != 5 {
		t.Fatal("a refused change was applied on the follower")
	}

	// The follower persisted what it applied.
	if err := fl.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := openWith(t, followerDir, nil)
	sameTopics(t, "reopened follower", l, reopened)

	// A restarted node replays the log over its persisted state (raft
	// replays from the last snapshot): it ends where it was.
	for _, e := range f.committed() {
		cmd, err := cluster.DecodeCommand(e.kind, e.payload)
		if err != nil {
			t.Fatal(err)
		}
		reopened.Apply(cmd)
	}
	sameTopics(t, "replayed", l, reopened)
	if err := reopened.Close(); err != nil {
		t.Fatal(err)
	}

	// A fresh node replaying the whole log reaches the same state.
	fresh := openWith(t, t.TempDir(), nil)
	defer fresh.Close()
	for _, e := range f.committed() {
		cmd, _ := cluster.DecodeCommand(e.kind, e.payload)
		fresh.Apply(cmd)
	}
	sameTopics(t, "fresh replay", l, fresh)
}

// stuckRepl never commits, or fails every proposal with err (off the
// proposer's goroutine, as the contract says).
type stuckRepl struct {
	*cluster.Local
	err error
}

func (s *stuckRepl) Propose(key string, cmd cluster.Command, done func(any, error)) {
	if s.err != nil {
		go done(nil, s.err)
	}
}

func TestProposeFailures(t *testing.T) {
	old := proposeTimeout
	proposeTimeout = 50 * time.Millisecond
	defer func() { proposeTimeout = old }()

	r := openWith(t, t.TempDir(), &stuckRepl{Local: cluster.NewLocal()})
	defer r.Close()
	if _, err := r.Create(CreateSpec{Name: "a", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("uncommitted create: %v", err)
	}
	r2 := openWith(t, t.TempDir(), &stuckRepl{Local: cluster.NewLocal(), err: fmt.Errorf("leadership lost: %w", cluster.ErrOutcomeUnknown)})
	defer r2.Close()
	if err := r2.SetBroker(logconfig.Broker{}); !errors.Is(err, kerr.RequestTimedOut) {
		t.Fatalf("failed proposal: %v", err)
	}
}

func TestVoterLimits(t *testing.T) {
	if r := open(t, t.TempDir()); r.MaxReplicationFactor() != 1 {
		t.Fatalf("single node: %d", r.MaxReplicationFactor())
	}
	voters := 3
	r, err := Open(Options{DataDir: t.TempDir(), Root: actor.NewActorSystem().Root, Logger: quietLogger(), Voters: func() int { return voters }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.MaxReplicationFactor() != 3 {
		t.Fatalf("voters: %d", r.MaxReplicationFactor())
	}
	three, four := "3", "4"
	if _, err := r.Create(CreateSpec{Name: "a", Partitions: 1, ReplicationFactor: 3, Configs: map[string]*string{"min.insync.replicas": &three}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(CreateSpec{Name: "b", Partitions: 1, ReplicationFactor: 4}); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf above voters: %v", err)
	}
	if _, err := r.Create(CreateSpec{Name: "b", Partitions: 1, ReplicationFactor: 1, Configs: map[string]*string{"min.insync.replicas": &four}}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("min isr above voters: %v", err)
	}
	if err := r.SetConfigs("a", map[string]string{"min.insync.replicas": "4"}, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("alter min isr above voters: %v", err)
	}
	voters = 0
	if r.MaxReplicationFactor() != 1 {
		t.Fatalf("no voters reported: %d", r.MaxReplicationFactor())
	}
}
