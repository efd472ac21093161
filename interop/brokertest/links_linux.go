//go:build linux

package brokertest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// A separated cluster is a Cluster whose links between nodes a test can
// cut, as a network partition would, while every node stays reachable
// from the test's own clients.
//
// Each node runs as its own user (uid nodeUIDBase()+id, group
// separatedGID). Links keeps an nftables table in this network namespace
// whose output chain drops the TCP packets that one node's sockets send to
// another node's ports (Kafka, raft, admin and extra listeners); a socket
// is matched by its owner's uid, and a socket a node accepts is owned by
// it too. Nothing is refused: packets vanish, connections stall and time
// out, as across a real partition. The test process's own sockets (its
// user is not a node's) pass.
const (
	separatedGID     = 61000
	linksTablePrefix = "regent_links_"
)

// nodeUIDBase is this test process's block of 16 uids, from its pid: two
// test processes running separated clusters at once must not match each
// other's nodes in their tables.
func nodeUIDBase() uint32 { return 200000 + uint32(os.Getpid()%4000000)*16 }

// Links cuts and heals the network between the nodes of a separated
// cluster. Its methods may be called from any goroutine.
type Links struct {
	t testing.TB
	c *Cluster

	mu    sync.Mutex // guards the fields below and orders rule changes
	conn  *nftables.Conn
	table *nftables.Table
	chain *nftables.Chain
	cut   map[[2]int32]bool // pairs {a, b} with a < b
}

// StartSeparatedCluster starts n nodes like StartCluster, each as its own
// user, and returns the Links that cut the network between them. It
// skips the test where that cannot be done: not root (the nodes run as
// other users), or no nftables in this network namespace.
func StartSeparatedCluster(t testing.TB, n int, extra ...string) (*Cluster, *Links) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a separated cluster runs each node as its own user: needs root")
	}
	l, err := newLinks(t)
	if err != nil {
		t.Skipf("cutting links between nodes needs nftables in this network namespace: %v", err)
	}
	// The nodes' users run the binary from its build directory.
	if err := os.Chmod(filepath.Dir(Binary(t)), 0o755); err != nil {
		t.Fatalf("separated cluster: %v", err)
	}
	c := startCluster(t, n, nil, extra, prepareSeparated)
	l.mu.Lock()
	l.c = c
	l.mu.Unlock()
	return c, l
}

// prepareSeparated gives node n its user and makes what it reads and
// writes (its data directory, the cluster secret) that user's.
func prepareSeparated(c *Cluster, n *Node) {
	if n.ID >= 16 {
		c.t.Fatalf("separated cluster: node %d: at most 15 nodes", n.ID)
	}
	u := &nodeUser{uid: nodeUIDBase() + uint32(n.ID), gid: separatedGID}
	n.user = u
	// Each is a fresh t.TempDir: its parent is the test's temporary
	// directory, private to root until opened for traversal.
	steps := []func() error{
		func() error { return os.Chmod(filepath.Dir(n.Dir), 0o711) },
		func() error { return os.Chown(n.Dir, int(u.uid), int(u.gid)) },
	}
	if c.secretFile != "" {
		steps = append(steps,
			func() error { return os.Chmod(filepath.Dir(c.secretFile), 0o711) },
			func() error { return os.Chown(c.secretFile, 0, separatedGID) },
			func() error { return os.Chmod(c.secretFile, 0o640) },
		)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			c.t.Fatalf("separated cluster: node %d: %v", n.ID, err)
		}
	}
}

// newLinks creates this process's table with an empty output chain, after
// removing the tables of test processes that are gone.
func newLinks(t testing.TB) (*Links, error) {
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	tables, err := conn.ListTables()
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	for _, tb := range tables {
		pid, err := strconv.Atoi(strings.TrimPrefix(tb.Name, linksTablePrefix))
		if strings.HasPrefix(tb.Name, linksTablePrefix) && err == nil && pid != os.Getpid() && !processAlive(pid) {
			conn.DelTable(tb)
		}
	}
	l := &Links{t: t, conn: conn, cut: map[[2]int32]bool{}}
	l.table = conn.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: linksTablePrefix + strconv.Itoa(os.Getpid())})
	l.chain = conn.AddChain(&nftables.Chain{
		Name:     "node_output",
		Table:    l.table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityFilter,
	})
	if err := conn.Flush(); err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.conn.DelTable(l.table)
		if err := l.conn.Flush(); err != nil {
			t.Errorf("links: delete table %s: %v", l.table.Name, err)
		}
	})
	return l, nil
}

// Cut drops every packet between nodes a and b, both ways, until Heal.
func (l *Links) Cut(a, b int32) {
	l.t.Helper()
	if a == b {
		l.t.Fatalf("links: cut node %d from itself", a)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut[[2]int32{min(a, b), max(a, b)}] = true
	l.applyLocked()
}

// Isolate cuts node id from every other member.
func (l *Links) Isolate(id int32) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, other := range l.c.IDs() {
		if other != id {
			l.cut[[2]int32{min(id, other), max(id, other)}] = true
		}
	}
	l.applyLocked()
}

// Heal restores every link.
func (l *Links) Heal() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.cut)
	l.applyLocked()
}

// Cuts lists the cut pairs, sorted, e.g. "1-2 1-3".
func (l *Links) Cuts() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for p := range l.cut {
		out = append(out, fmt.Sprintf("%d-%d", p[0], p[1]))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// applyLocked replaces the chain's rules with those of l.cut, in one
// netlink batch (the kernel applies it whole or not at all).
func (l *Links) applyLocked() {
	l.t.Helper()
	l.conn.FlushChain(l.chain)
	for p := range l.cut {
		a, b := l.c.mustNode(l.t, p[0]), l.c.mustNode(l.t, p[1])
		l.dropLocked(a, b)
		l.dropLocked(b, a)
	}
	if err := l.conn.Flush(); err != nil {
		l.t.Fatalf("links: apply cuts: %v", err)
	}
}

// dropLocked adds a rule per port of to: TCP packets sent by from's
// sockets to that port are dropped.
func (l *Links) dropLocked(from, to *Node) {
	for _, port := range nodePorts(l.t, to) {
		l.conn.AddRule(&nftables.Rule{Table: l.table, Chain: l.chain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(from.user.uid)},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, // destination port
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
	}
}

// nodePorts is every port node n listens on.
func nodePorts(t testing.TB, n *Node) []uint16 {
	addrs := []string{n.Addr, n.Raft, n.Admin}
	for _, a := range n.Listeners {
		addrs = append(addrs, a)
	}
	var ports []uint16
	for _, a := range addrs {
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatalf("links: node %d address %q: %v", n.ID, a, err)
		}
		v, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			t.Fatalf("links: node %d address %q: %v", n.ID, a, err)
		}
		ports = append(ports, uint16(v))
	}
	return ports
}
