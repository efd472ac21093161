package brokertest

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Voter is one member of the raft configuration as `regent cluster status`
// prints it.
type Voter struct {
	ID    int32  `json:"id"`
	Kafka string `json:"kafka"`
	Raft  string `json:"raft"`
	Admin string `json:"admin"`
}

// Status is the JSON object `regent cluster status` prints.
type Status struct {
	NodeID       int32   `json:"node_id"`
	LeaderID     int32   `json:"leader_id"`
	State        string  `json:"state"`
	Term         uint64  `json:"term"`
	CommitIndex  uint64  `json:"commit_index"`
	AppliedIndex uint64  `json:"applied_index"`
	StateIndex   uint64  `json:"state_index"`
	Restarting   bool    `json:"restarting"`
	Voters       []Voter `json:"voters"`
	// Groups are the node's partition raft groups (--raft-groups).
	Groups []GroupStatus `json:"groups"`
}

// GroupStatus is one partition raft group in a Status.
type GroupStatus struct {
	Group      uint8  `json:"group"`
	LeaderID   int32  `json:"leader_id"`
	Term       uint64 `json:"term"`
	StateIndex uint64 `json:"state_index"`
	Ready      bool   `json:"ready"`
}

// IsLeader reports whether the node says it is the leader.
func (s Status) IsLeader() bool {
	return strings.EqualFold(s.State, "leader") && s.LeaderID == s.NodeID
}

// HasVoter reports whether id is in the node's view of the voters.
func (s Status) HasVoter(id int32) bool {
	return slices.ContainsFunc(s.Voters, func(v Voter) bool { return v.ID == id })
}

// VoterIDs returns the voters' ids, sorted.
func (s Status) VoterIDs() []int32 {
	ids := make([]int32, 0, len(s.Voters))
	for _, v := range s.Voters {
		ids = append(ids, v.ID)
	}
	slices.Sort(ids)
	return ids
}

// Node is one regent process of a Cluster. Its Broker's Addr is the
// node's Kafka address and Dir its data directory; Raft and Admin are its
// raft and HTTP admin addresses. A node keeps its addresses and data over
// Kill and Restart, and its log over restarts (use Cluster.Restart, not
// the Broker's, which waits only for Kafka and starts a fresh log).
type Node struct {
	*Broker
	ID    int32
	Raft  string
	Admin string
	Join  bool // started with --join (added by AddNode)
	// Listeners maps each extra listener's name (StartClusterListeners)
	// to its address; the node's PLAINTEXT one is Addr. Set before start.
	Listeners map[string]string

	// paused: the process is SIGSTOPped (Cluster.Pause) and not yet
	// SIGCONTinued. Set by the test's goroutine, read by any.
	paused atomic.Bool
}

// Paused reports whether the node is SIGSTOPped by Cluster.Pause.
func (n *Node) Paused() bool { return n.paused.Load() }

// Alive reports whether the node's process is running.
func (n *Node) Alive() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

func (n *Node) peerSpec() string {
	return fmt.Sprintf("%d=%s/%s/%s", n.ID, n.Addr, n.Raft, n.Admin)
}

// Cluster is a set of regent nodes in raft cluster mode on loopback ports.
// Every process is killed when the test ends; if the test failed, each
// node's log tail is logged. Its methods are meant for the test's own
// goroutine, except Seeds, Node and Status, which any goroutine may call.
type Cluster struct {
	t     testing.TB
	extra []string
	cli   []string // appended to every `regent cluster` command (TLS flags)
	// secretFile is the nodes' --cluster-secret-file ("" when extra
	// gave cluster TLS and no secret).
	secretFile string
	// listeners are the extra listeners' names every node gets (e.g.
	// SASL_PLAINTEXT), each on its own port beside the PLAINTEXT Addr.
	listeners []string
	// prepare, if not nil, runs on each node before its first start
	// (StartSeparatedCluster's users).
	prepare func(*Cluster, *Node)

	mu    sync.Mutex
	nodes map[int32]*Node // the members: started and not removed
	all   []*Node         // every node ever started, for the log tails
}

// Deadlines of the harness's own waits.
const (
	listenTimeout = 60 * time.Second
	leaderTimeout = 90 * time.Second
	cliTimeout    = 10 * time.Second
)

// StartCluster starts n nodes (ids 1..n) that bootstrap together from the
// same --peers, each on fresh data and free loopback ports, with extra
// args appended to every node's command line (and to any AddNode later).
// It returns once every node listens on its admin and Kafka ports and a
// majority agrees on a leader.
func StartCluster(t testing.TB, n int, extra ...string) *Cluster {
	t.Helper()
	return startCluster(t, n, nil, extra, nil)
}

// StartClusterListeners is StartCluster with, on every node (and any
// AddNode later), one more listener per name in listeners (Kafka's
// security protocol names: SASL_PLAINTEXT, ...) on its own free port
// after the PLAINTEXT one, which stays the node's address in the cluster.
// Node.Listeners and ListenerSeeds give their addresses; extra carries
// what those listeners need (--sasl-mechanisms, TLS files).
func StartClusterListeners(t testing.TB, n int, listeners []string, extra ...string) *Cluster {
	t.Helper()
	return startCluster(t, n, listeners, extra, nil)
}

// StartClusterPrepared is StartCluster with prepare run on every node
// (and any AddNode's) before its first start: to give a node another
// data directory, say (Node.Dir).
func StartClusterPrepared(t testing.TB, n int, prepare func(*Node), extra ...string) *Cluster {
	t.Helper()
	return startCluster(t, n, nil, extra, func(_ *Cluster, nd *Node) { prepare(nd) })
}

// startCluster is StartClusterListeners with prepare (if not nil) run on
// every node, this one's and any AddNode's, before its first start.
func startCluster(t testing.TB, n int, listeners, extra []string, prepare func(*Cluster, *Node)) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartCluster(%d)", n)
	}
	Binary(t) // build before any clock starts
	c := &Cluster{t: t, extra: extra, cli: cliTLSArgs(extra), nodes: map[int32]*Node{}, listeners: listeners, prepare: prepare}
	// The first TempDir registers the removal of the test's temporary
	// directories; cleanups run last-registered first, so registering it
	// before shutdown removes the nodes' directories after the nodes are
	// dead, not while one still writes there ("directory not empty").
	_ = t.TempDir()
	t.Cleanup(c.shutdown)
	c.useSecret()
	per := 3 + len(listeners)
	ports := freePorts(t, per*n)
	var nodes []*Node
	for i := range n {
		nodes = append(nodes, c.newNode(int32(i+1), ports[per*i:per*i+per], false))
	}
	var specs []string
	for _, nd := range nodes {
		specs = append(specs, nd.peerSpec())
	}
	peers := strings.Join(specs, ",")
	for _, nd := range nodes {
		nd.Args = c.nodeArgs(nd, peers)
		if c.prepare != nil {
			c.prepare(c, nd)
		}
		c.addMember(nd)
	}
	// Every process first, then the waits: a node may not listen before
	// it can reach its peers.
	for _, nd := range nodes {
		nd.spawn()
	}
	deadline := time.Now().Add(listenTimeout)
	for _, nd := range nodes {
		c.waitListening(nd, nd.Admin, deadline)
		c.waitListening(nd, nd.Addr, deadline)
		for _, name := range listeners {
			c.waitListening(nd, nd.Listeners[name], deadline)
		}
	}
	c.WaitLeader(t, leaderTimeout)
	return c
}

// useSecret gives the nodes a cluster secret unless extra has one or
// cluster TLS: a node refuses a plaintext admin endpoint without one.
// `regent cluster` commands sign with it.
func (c *Cluster) useSecret() {
	if i := slices.Index(c.extra, "--cluster-secret-file"); i >= 0 && i+1 < len(c.extra) {
		c.secretFile = c.extra[i+1]
	} else if !slices.Contains(c.extra, "--cluster-tls-cert") {
		var b [32]byte
		_, _ = crand.Read(b[:])
		c.secretFile = filepath.Join(c.t.TempDir(), "cluster.secret")
		if err := os.WriteFile(c.secretFile, []byte(hex.EncodeToString(b[:])+"\n"), 0o600); err != nil {
			c.t.Fatalf("cluster secret: %v", err)
		}
		c.extra = append(slices.Clip(c.extra), "--cluster-secret-file", c.secretFile)
	}
	if c.secretFile != "" {
		c.cli = append(c.cli, "--secret-file", c.secretFile)
	}
}

// SecretFile is the file holding the nodes' cluster secret ("" when the
// cluster has TLS links and no secret).
func (c *Cluster) SecretFile() string { return c.secretFile }

// newNode takes ports for Kafka, raft, admin and then one per extra
// listener.
func (c *Cluster) newNode(id int32, ports []int, join bool) *Node {
	var ls map[string]string
	for i, name := range c.listeners {
		if ls == nil {
			ls = map[string]string{}
		}
		ls[name] = fmt.Sprintf("127.0.0.1:%d", ports[3+i])
	}
	return &Node{
		Listeners: ls,
		Broker: &Broker{
			Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]),
			Dir:  c.t.TempDir(),
			t:    c.t,
		},
		ID:    id,
		Raft:  fmt.Sprintf("127.0.0.1:%d", ports[1]),
		Admin: fmt.Sprintf("127.0.0.1:%d", ports[2]),
		Join:  join,
	}
}

// nodeArgs is everything after --listen and --data.
func (c *Cluster) nodeArgs(n *Node, peers string) []string {
	args := []string{
		"--node-id", fmt.Sprint(n.ID),
		"--raft-listen", n.Raft,
		"--admin-listen", n.Admin,
		"--peers", peers,
	}
	if n.Join {
		args = append(args, "--join")
	}
	if len(c.listeners) > 0 {
		// --listeners replaces --listen; PLAINTEXT first, so that it
		// stays the node's address in the cluster.
		ls := []string{"PLAINTEXT://" + n.Addr}
		for _, name := range c.listeners {
			ls = append(ls, name+"://"+n.Listeners[name])
		}
		args = append(args, "--listeners", strings.Join(ls, ","))
	}
	return append(args, c.extra...)
}

func (c *Cluster) addMember(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[n.ID] = n
	c.all = append(c.all, n)
}

func (c *Cluster) shutdown() {
	c.mu.Lock()
	all := slices.Clone(c.all)
	c.mu.Unlock()
	for _, n := range all {
		n.Kill()
	}
	if !c.t.Failed() {
		return
	}
	// The whole logs outlive the test's temporary directories.
	dir, err := os.MkdirTemp("", "regent-cluster-logs-"+strings.NewReplacer("/", "_", " ", "_").Replace(c.t.Name())+"-")
	for _, n := range all {
		where := ""
		if err == nil {
			path := filepath.Join(dir, fmt.Sprintf("node-%d.log", n.ID))
			if werr := os.WriteFile(path, []byte(n.LogTail(math.MaxInt)), 0o644); werr == nil {
				where = " (whole log: " + path + ")"
			}
		}
		c.t.Logf("node %d (kafka %s, raft %s, admin %s) log tail%s:\n%s", n.ID, n.Addr, n.Raft, n.Admin, where, n.LogTail(8000))
	}
}

// freePorts returns k distinct loopback ports that were free a moment ago.
// freePorts returns k distinct ports free now, chosen at random below the
// kernel's ephemeral range. A node that is killed and restarted binds its
// ports again, and while it is down a port from the ephemeral range (where
// listening on port 0 picks) may be handed to any outgoing connection on
// the machine: restarts failed with "bind: address already in use".
func freePorts(t testing.TB, k int) []int {
	t.Helper()
	const lo = 10000
	hi := ephemeralLow() - 1
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < k; tries++ {
		if tries > 100*k {
			t.Fatalf("could not find %d distinct free ports", k)
		}
		var p int
		if hi-lo < 1000 {
			p = FreePort(t) // an unusual range: the ephemeral one it is
		} else {
			p = lo + rand.IntN(hi-lo+1)
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue
			}
			l.Close()
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n <= 0 {
		return 32768
	}
	return n
}

// spawn starts the process without waiting for it to listen, appending to
// the node's log rather than replacing it.
func (b *Broker) spawn() {
	b.t.Helper()
	bin := Binary(b.t)
	args := append([]string{"--listen", b.Addr, "--data", b.Dir}, b.Args...)
	cmd := exec.Command(bin, args...)
	runAsUser(cmd, b.user)
	b.mu.Lock()
	if b.log == nil {
		b.log = new(bytes.Buffer)
	} else {
		fmt.Fprintf(b.log, "\n===== brokertest: restarted at %s =====\n", time.Now().Format(time.RFC3339Nano))
	}
	w := &lockedWriter{w: b.log, mu: &b.mu}
	b.mu.Unlock()
	cmd.Stdout, cmd.Stderr = w, w
	if err := StartProcess(cmd); err != nil {
		b.t.Fatalf("start regent: %v", err)
	}
	b.cmd = cmd
	exited := make(chan struct{})
	b.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
}

// waitListening waits until addr accepts connections, failing the test if
// the node exits or the deadline passes.
func (c *Cluster) waitListening(n *Node, addr string, deadline time.Time) {
	c.t.Helper()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-n.exited:
			c.t.Fatalf("node %d exited before listening on %s:\n%s", n.ID, addr, n.LogTail(4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d did not listen on %s in time:\n%s", n.ID, addr, n.LogTail(4000))
		}
	}
}

// Node returns the member with that id, or nil.
func (c *Cluster) Node(id int32) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// Nodes returns the members in id order.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Node, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Node) int { return int(a.ID - b.ID) })
	return out
}

// IDs returns the members' ids in order.
func (c *Cluster) IDs() []int32 {
	var ids []int32
	for _, n := range c.Nodes() {
		ids = append(ids, n.ID)
	}
	return ids
}

// LiveIDs returns the ids of the members whose process runs.
func (c *Cluster) LiveIDs() []int32 {
	var ids []int32
	for _, n := range c.Nodes() {
		if n.Alive() {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// Seeds returns every member's Kafka address, running or not.
func (c *Cluster) Seeds() []string {
	var s []string
	for _, n := range c.Nodes() {
		s = append(s, n.Addr)
	}
	return s
}

// ListenerSeeds returns the members' addresses of the extra listener
// name (StartClusterListeners).
func (c *Cluster) ListenerSeeds(name string) []string {
	var s []string
	for _, n := range c.Nodes() {
		s = append(s, n.Listeners[name])
	}
	return s
}

// LiveSeeds returns the Kafka addresses of the members that run.
func (c *Cluster) LiveSeeds() []string {
	var s []string
	for _, n := range c.Nodes() {
		if n.Alive() {
			s = append(s, n.Addr)
		}
	}
	return s
}

func (c *Cluster) mustNode(t testing.TB, id int32) *Node {
	t.Helper()
	n := c.Node(id)
	if n == nil {
		t.Fatalf("no node %d in the cluster (members %v)", id, c.IDs())
	}
	return n
}

// Kill sends SIGKILL to node id and waits for it to go.
func (c *Cluster) Kill(id int32) {
	c.t.Helper()
	n := c.mustNode(c.t, id)
	n.Kill()
	n.paused.Store(false)
	c.t.Logf("cluster: killed node %d", id)
}

// Pause sends SIGSTOP to node id: the process and its sockets stay, but
// nothing answers, as in a long GC pause or a frozen VM. Until Resume, the
// harness's status polls (WaitLeader, LeaderID, WaitTopic, ...) leave the
// node out: a stopped node would hold each poll for the CLI's timeout.
// Kill ends a paused node as any other.
func (c *Cluster) Pause(id int32) {
	c.t.Helper()
	n := c.mustNode(c.t, id)
	if !n.Alive() {
		c.t.Fatalf("pause node %d: it is not running", id)
	}
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		c.t.Fatalf("pause node %d: %v", id, err)
	}
	n.paused.Store(true)
	c.t.Logf("cluster: paused node %d (SIGSTOP)", id)
}

// Resume sends SIGCONT to node id, paused by Pause.
func (c *Cluster) Resume(id int32) {
	c.t.Helper()
	n := c.mustNode(c.t, id)
	if !n.Paused() {
		c.t.Fatalf("resume node %d: it is not paused", id)
	}
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatalf("resume node %d: %v", id, err)
	}
	n.paused.Store(false)
	c.t.Logf("cluster: resumed node %d (SIGCONT)", id)
}

// Restart starts node id again on the same addresses and data and waits
// until it listens on its admin and Kafka ports (not until it caught up:
// see WaitCaughtUp).
func (c *Cluster) Restart(id int32) {
	c.t.Helper()
	n := c.mustNode(c.t, id)
	if n.Alive() {
		c.t.Fatalf("restart node %d: it is running", id)
	}
	n.spawn()
	deadline := time.Now().Add(listenTimeout)
	c.waitListening(n, n.Admin, deadline)
	c.waitListening(n, n.Addr, deadline)
	c.t.Logf("cluster: restarted node %d", id)
}

// CLI runs `regent cluster <args...>` and returns its stdout; err carries
// the exit status and stderr.
func (c *Cluster) CLI(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, Binary(c.t), append(append([]string{"cluster"}, args...), c.cli...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := StartProcess(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("regent cluster %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// StatusAt runs `regent cluster status --admin addr`.
func (c *Cluster) StatusAt(ctx context.Context, admin string) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	out, err := c.CLI(ctx, "status", "--admin", admin)
	if err != nil {
		return Status{}, err
	}
	var st Status
	i := strings.IndexByte(out, '{')
	if i < 0 {
		return Status{}, fmt.Errorf("cluster status --admin %s: no JSON object in %q", admin, out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&st); err != nil {
		return Status{}, fmt.Errorf("cluster status --admin %s: %v in %q", admin, err, out)
	}
	return st, nil
}

// Status is node id's `cluster status`.
func (c *Cluster) Status(id int32) (Status, error) {
	n := c.Node(id)
	if n == nil {
		return Status{}, fmt.Errorf("no node %d", id)
	}
	return c.StatusAt(context.Background(), n.Admin)
}

// statuses asks every running member that is not paused for its status,
// concurrently.
func (c *Cluster) statuses() (map[int32]Status, map[int32]error) {
	type res struct {
		id  int32
		st  Status
		err error
	}
	var live []*Node
	for _, n := range c.Nodes() {
		if n.Alive() && !n.Paused() {
			live = append(live, n)
		}
	}
	ch := make(chan res, len(live))
	for _, n := range live {
		go func() {
			st, err := c.StatusAt(context.Background(), n.Admin)
			ch <- res{n.ID, st, err}
		}()
	}
	sts, errs := map[int32]Status{}, map[int32]error{}
	for range live {
		r := <-ch
		if r.err != nil {
			errs[r.id] = r.err
		} else {
			sts[r.id] = r.st
		}
	}
	return sts, errs
}

// leaderNow returns the leader a majority of the voters agrees on right
// now: a running node that says it leads, whom running nodes that are a
// majority of its voters name as leader. 0 if there is none.
func leaderNow(sts map[int32]Status) int32 {
	votes := map[int32]int{}
	for _, st := range sts {
		if st.LeaderID > 0 {
			votes[st.LeaderID]++
		}
	}
	for id, n := range votes {
		ls, ok := sts[id]
		if !ok || !ls.IsLeader() {
			continue
		}
		if len(ls.Voters) == 0 || 2*n > len(ls.Voters) {
			return id
		}
	}
	return 0
}

// LeaderNow asks the running members once and returns the leader a
// majority of them agrees on, 0 if there is none right now.
func (c *Cluster) LeaderNow() int32 {
	sts, _ := c.statuses()
	return leaderNow(sts)
}

// WaitLeader polls `cluster status` on the running members until a
// majority agrees on a running leader, and returns its id.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) int32 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		sts, errs := c.statuses()
		if id := leaderNow(sts); id > 0 {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader within %s: statuses %+v, errors %v", timeout, sts, errs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// LeaderID returns the current leader's id, waiting up to 30s for one.
func (c *Cluster) LeaderID(t testing.TB) int32 {
	t.Helper()
	return c.WaitLeader(t, 30*time.Second)
}

// WaitCaughtUp waits until node id's state holds everything the leader's
// state held at the call (its state index reached the leader's), it is not
// restarting to load an installed snapshot, and it knows the leader. raft's
// applied index is not enough: it counts entries handed to the FSM, not
// applied, and on a node that accepted a snapshot and is about to restart
// it runs ahead of a state directory that is about to be replaced.
func (c *Cluster) WaitCaughtUp(t testing.TB, id int32, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	leader := c.WaitLeader(t, timeout)
	var target uint64
	for {
		ls, err := c.Status(leader)
		if err == nil {
			target = ls.StateIndex
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader %d status: %v", leader, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	groupTargets := c.groupTargets()
	var last Status
	var lastErr error
	for {
		st, err := c.Status(id)
		if err == nil && st.StateIndex >= target && !st.Restarting && st.LeaderID > 0 && groupsCaughtUp(st, groupTargets) {
			t.Logf("cluster: node %d caught up (state index %d, leader %d's was %d; %d partition groups)", id, st.StateIndex, leader, target, len(st.Groups))
			return
		}
		last, lastErr = st, err
		if time.Now().After(deadline) {
			t.Fatalf("node %d did not catch up to index %d within %s: %+v %v", id, target, timeout, last, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// groupTargets is, for each partition raft group, the state index its
// leader reports now (none: no groups, or no leader answers).
func (c *Cluster) groupTargets() map[uint8]uint64 {
	sts, _ := c.statuses()
	out := map[uint8]uint64{}
	for _, st := range sts {
		for _, g := range st.Groups {
			if g.Ready && g.LeaderID == st.NodeID {
				out[g.Group] = g.StateIndex
			}
		}
	}
	return out
}

// groupsCaughtUp reports whether st's partition groups hold their targets
// and follow a leader.
func groupsCaughtUp(st Status, targets map[uint8]uint64) bool {
	for _, g := range st.Groups {
		if g.StateIndex < targets[g.Group] || g.LeaderID <= 0 {
			return false
		}
	}
	return true
}

// waitVoter waits until the leader's configuration has (present) or lacks
// id, running try (if not nil) between polls while it does not.
func (c *Cluster) waitVoter(t testing.TB, id int32, present bool, deadline time.Time, try func() error) {
	t.Helper()
	var lastErr error
	for {
		sts, _ := c.statuses()
		switch l := leaderNow(sts); {
		case l == 0:
			lastErr = errors.New("no leader")
		case l == id && present:
			return // it leads, so it is a voter
		case l == id:
			lastErr = fmt.Errorf("node %d leads", id)
		case sts[l].HasVoter(id) == present:
			return
		}
		if try != nil {
			if err := try(); err != nil {
				lastErr = err
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("voter %d present=%v not reached: %v; statuses %+v", id, present, lastErr, sts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// AddNode starts a node with the next free id and --join, adds it with
// `regent cluster add-voter` (sent to a running member's admin, the first
// in id order) and waits until it is a voter, listens on Kafka and has
// caught up.
func (c *Cluster) AddNode(t testing.TB) *Node {
	t.Helper()
	var id int32
	members := c.Nodes()
	for _, n := range members {
		id = max(id, n.ID)
	}
	id++
	ports := freePorts(t, 3+len(c.listeners))
	n := c.newNode(id, ports, true)
	// --peers names the current members and the new node: the join does
	// not bootstrap from it, but it tells the node where the cluster is.
	var specs []string
	for _, m := range members {
		specs = append(specs, m.peerSpec())
	}
	specs = append(specs, n.peerSpec())
	n.Args = c.nodeArgs(n, strings.Join(specs, ","))
	if c.prepare != nil {
		c.prepare(c, n)
	}
	c.addMember(n)
	n.spawn()
	deadline := time.Now().Add(leaderTimeout)
	// Added before it listens: a node with no raft state opens its state,
	// and then its ports, only once the leader has sent it entries or a
	// snapshot (cluster.RaftOptions.StartWait).
	attempt := 0
	c.waitVoter(t, id, true, deadline, func() error {
		if !n.Alive() {
			t.Fatalf("joining node %d exited:\n%s", id, n.LogTail(4000))
		}
		live := c.otherLive(id)
		if len(live) == 0 {
			return errors.New("no running member")
		}
		via := live[attempt%len(live)]
		attempt++
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		_, err := c.CLI(ctx, "add-voter", "--admin", via.Admin, "--id", fmt.Sprint(id),
			"--kafka", n.Addr, "--raft", n.Raft, "--node-admin", n.Admin)
		return err
	})
	c.waitListening(n, n.Admin, deadline)
	c.waitListening(n, n.Addr, deadline)
	c.WaitCaughtUp(t, id, time.Until(deadline))
	t.Logf("cluster: node %d joined (kafka %s)", id, n.Addr)
	return n
}

func (c *Cluster) otherLive(id int32) []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if n.ID != id && n.Alive() {
			out = append(out, n)
		}
	}
	return out
}

// RemoveNode runs `regent cluster remove-voter` for id (via another
// running member's admin) until the leader's configuration lacks it, then
// kills the node and drops it from the members.
func (c *Cluster) RemoveNode(t testing.TB, id int32) {
	t.Helper()
	n := c.mustNode(t, id)
	deadline := time.Now().Add(leaderTimeout)
	attempt := 0
	c.waitVoter(t, id, false, deadline, func() error {
		live := c.otherLive(id)
		if len(live) == 0 {
			return errors.New("no other running member")
		}
		via := live[attempt%len(live)]
		attempt++
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		_, err := c.CLI(ctx, "remove-voter", "--admin", via.Admin, "--id", fmt.Sprint(id))
		return err
	})
	n.Kill()
	c.mu.Lock()
	delete(c.nodes, id)
	c.mu.Unlock()
	t.Logf("cluster: node %d removed", id)
}

// Client returns a kgo client seeded with the running members, closed when
// the test ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.LiveSeeds()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// WaitMetadata polls Metadata (for topics; for none, brokers only) from
// the running members until ok accepts it, and returns it.
func (c *Cluster) WaitMetadata(t testing.TB, timeout time.Duration, topics []string, ok func(kadm.Metadata) error) kadm.Metadata {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.LiveSeeds()...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var md kadm.Metadata
		if len(topics) == 0 {
			md, err = adm.BrokerMetadata(ctx)
		} else {
			md, err = adm.Metadata(ctx, topics...)
		}
		cancel()
		if err == nil {
			if err = ok(md); err == nil {
				return md
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("metadata for %v not as wanted within %s: %v", topics, timeout, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitTopic waits until Metadata shows topic with the given number of
// partitions, each led by the raft leader with at least minISR replicas in
// sync, and returns the topic's detail.
func (c *Cluster) WaitTopic(t testing.TB, topic string, partitions, minISR int, timeout time.Duration) kadm.TopicDetail {
	t.Helper()
	md := c.WaitMetadata(t, timeout, []string{topic}, func(md kadm.Metadata) error {
		sts, _ := c.statuses()
		leader := leaderNow(sts)
		if leader == 0 {
			return errors.New("no raft leader")
		}
		td, ok := md.Topics[topic]
		switch {
		case !ok:
			return fmt.Errorf("topic %s missing", topic)
		case td.Err != nil:
			return fmt.Errorf("topic %s: %w", topic, td.Err)
		case len(td.Partitions) != partitions:
			return fmt.Errorf("topic %s: %d partitions, want %d", topic, len(td.Partitions), partitions)
		}
		for _, p := range td.Partitions.Sorted() {
			switch {
			case p.Err != nil:
				return fmt.Errorf("%s/%d: %w", topic, p.Partition, p.Err)
			case p.Leader != leader && !c.partitionGroups():
				return fmt.Errorf("%s/%d: leader %d, raft leader %d", topic, p.Partition, p.Leader, leader)
			case p.Leader <= 0:
				return fmt.Errorf("%s/%d: no leader", topic, p.Partition)
			case len(p.ISR) < minISR:
				return fmt.Errorf("%s/%d: ISR %v, want at least %d", topic, p.Partition, p.ISR, minISR)
			}
		}
		return nil
	})
	return md.Topics[topic]
}

// partitionGroups reports whether the nodes run partition raft groups
// (--raft-groups N > 0): partitions are then led by their groups' leaders,
// not all by the metadata group's.
func (c *Cluster) partitionGroups() bool {
	for i, a := range c.extra {
		if a == "--raft-groups" && i+1 < len(c.extra) && c.extra[i+1] != "0" {
			return true
		}
	}
	return false
}

// nodeUser is a user and group a node's process runs as.
type nodeUser struct{ uid, gid uint32 }
