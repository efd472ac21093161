package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/interop/testwait"
)

// TestRaftPortRoutesByPreamble: a connection reaches the group its
// preamble names, raft's or the fetch server's, with the bytes after the
// preamble intact; group 0's is the wire of a node without groups (raft's
// bytes alone, or fetchByte). A connection for a group not open here is
// closed, and closing one group's layer leaves the others running.
func TestRaftPortRoutesByPreamble(t *testing.T) {
	port, err := OpenRaftPort(RaftPortOptions{Bind: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	fetched := make(chan string, 8)
	fetchServer := func(name string) func(net.Conn) {
		return func(c net.Conn) {
			b := make([]byte, 1)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, b); err != nil {
				fetched <- name + ": " + err.Error()
				return
			}
			fetched <- name + ":" + string(b)
		}
	}
	g0, err := port.open(0, fetchServer("fetch0"), false)
	if err != nil {
		t.Fatal(err)
	}
	g3, err := port.open(3, fetchServer("fetch3"), false)
	if err != nil {
		t.Fatal(err)
	}

	// send opens a plain connection to the port and writes b.
	send := func(b ...byte) net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", port.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// accepted is what the next connection l accepts holds: its first n
	// bytes, or the error.
	accepted := func(l *muxStream, n int) string {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				got <- "accept: " + err.Error()
				return
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b := make([]byte, n)
			if _, err := io.ReadFull(c, b); err != nil {
				got <- "read: " + err.Error()
				return
			}
			got <- string(b)
		}()
		select {
		case s := <-got:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("group %d accepted nothing in 10s", l.group)
			return ""
		}
	}
	fetch := func() string {
		t.Helper()
		select {
		case s := <-fetched:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no fetch served in 10s")
			return ""
		}
	}
	// closed reports whether the port closed c (EOF, or a reset for
	// bytes it left unread), not just went quiet.
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}

	// The wire, byte for byte.
	send(0x01, 'a')
	if got := accepted(g0, 2); got != "\x01a" {
		t.Fatalf("group 0 raft connection: %q, want raft's bytes as sent", got)
	}
	send(groupRaftByte, 3, 0x01, 'b')
	if got := accepted(g3, 2); got != "\x01b" {
		t.Fatalf("group 3 raft connection: %q, want raft's bytes after the preamble", got)
	}
	send(fetchByte, 'c')
	if got := fetch(); got != "fetch0:c" {
		t.Fatalf("group 0 fetch: %q", got)
	}
	send(groupFetchByte, 3, 'd')
	if got := fetch(); got != "fetch3:d" {
		t.Fatalf("group 3 fetch: %q", got)
	}
	for _, pre := range [][]byte{{groupRaftByte, 5, 0x01}, {groupFetchByte, 7, 'x'}} {
		if !closed(send(pre...)) {
			t.Fatalf("connection % x for a group not open here was not closed", pre)
		}
	}

	// The layers' own dials write those preambles.
	for _, tc := range []struct {
		l    *muxStream
		want string
	}{{g0, "fetch0:e"}, {g3, "fetch3:e"}} {
		c, err := tc.l.Dial(raft.ServerAddress(port.Addr()), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte{0x02})
		if got := accepted(tc.l, 1); got != "\x02" {
			t.Fatalf("group %d dial: %q", tc.l.group, got)
		}
		_ = c.Close()
		if c, err = tc.l.dialFetch(port.Addr(), 5*time.Second); err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte{'e'})
		if got := fetch(); got != tc.want {
			t.Fatalf("group %d dialFetch: %q, want %q", tc.l.group, got, tc.want)
		}
		_ = c.Close()
	}

	// One group at a time per number; closing it stops its Accept only
	// and frees the number.
	if _, err := port.Group(3); err == nil {
		t.Fatal("group 3 opened twice")
	}
	if err := g3.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g3.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed group: %v", err)
	}
	if !closed(send(groupRaftByte, 3, 0x01)) {
		t.Fatal("connection for a closed group was not closed")
	}
	send(0x03)
	if got := accepted(g0, 1); got != "\x03" {
		t.Fatalf("group 0 after group 3 closed: %q", got)
	}
	l3, err := port.Group(3)
	if err != nil {
		t.Fatalf("reopen group 3: %v", err)
	}
	send(groupRaftByte, 3, 0x04)
	if got := accepted(l3.(*muxStream), 1); got != "\x04" {
		t.Fatalf("reopened group 3: %q", got)
	}
	// Group's layer has no fetch server: fetches for it are refused.
	if !closed(send(groupFetchByte, 3, 'x')) {
		t.Fatal("fetch for a group without a fetch server was not closed")
	}

	// Closing the port closes every group.
	if err := port.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g0.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("group 0 accept after the port closed: %v", err)
	}
	if _, err := l3.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("group 3 accept after the port closed: %v", err)
	}
	if _, err := port.Group(1); err == nil {
		t.Fatal("a group opened on a closed port")
	}
}

// portCluster is n nodes' raft ports on free 127.0.0.1 ports, closed at
// the end of the test (after the groups registered later shut down).
func portCluster(t *testing.T, n int) ([]*RaftPort, []Peer) {
	t.Helper()
	var ports []*RaftPort
	var peers []Peer
	for i := range n {
		p, err := OpenRaftPort(RaftPortOptions{Bind: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		ports = append(ports, p)
		peers = append(peers, Peer{ID: int32(i + 1), Raft: p.Addr()})
	}
	return ports, peers
}

// groupOpts is node i's options for group g on its port.
func groupOpts(base string, ports []*RaftPort, peers []Peer, i int, g uint8) RaftOptions {
	dir := filepath.Join(base, fmt.Sprint(peers[i].ID), fmt.Sprint("group-", g))
	return RaftOptions{Self: peers[i], Peers: peers, Port: ports[i], Group: g,
		Dir: filepath.Join(dir, "raft"), StateDir: filepath.Join(dir, "state")}
}

// shutdownAll shuts nodes down at the end of the test.
func shutdownAll(t *testing.T, groups ...[]*testNode) {
	t.Cleanup(func() {
		for _, nodes := range groups {
			for _, n := range nodes {
				if n != nil {
					_ = n.r.Shutdown()
				}
			}
		}
	})
}

// commit proposes values [from, to) to the group's leader, each retried
// until a leader takes it, and returns them.
func commit(t *testing.T, nodes []*testNode, from, to uint64) []uint64 {
	t.Helper()
	var vals []uint64
	for v := from; v < to; v++ {
		testwait.For(t, fmt.Sprintf("value %d to commit", v), 20*time.Second, func() bool {
			l := leaderOf(nodes)
			return l != nil && propose(t, l, v) == nil
		})
		vals = append(vals, v)
	}
	return vals
}

func awaitValues(t *testing.T, what string, nodes []*testNode, want []uint64) {
	t.Helper()
	for _, n := range nodes {
		testwait.For(t, fmt.Sprintf("%s: node %d to hold every value", what, n.opts.Self.ID), 20*time.Second, func() bool {
			return fmt.Sprint(n.list.snapshot()) == fmt.Sprint(want)
		})
	}
}

// TestRaftPortTwoGroups: three nodes, one raft port each, run two raft
// groups over them: each elects its leader and commits its own values.
// Group 1's leader stopping (its layer closed, the port open) leaves group
// 0 committing, group 1 elects another leader, and the stopped member
// reopens on the same port and catches up.
func TestRaftPortTwoGroups(t *testing.T) {
	base := t.TempDir()
	ports, peers := portCluster(t, 3)
	groups := [2][]*testNode{make([]*testNode, 3), make([]*testNode, 3)}
	shutdownAll(t, groups[0], groups[1])
	for g := range groups {
		for i := range peers {
			groups[g][i] = startNode(t, groupOpts(base, ports, peers, i, uint8(g)), false)
		}
	}
	want := [2][]uint64{}
	for g, nodes := range groups {
		testwait.For(t, fmt.Sprintf("group %d's leader", g), 20*time.Second, func() bool { return leaderOf(nodes) != nil })
	}
	want[0] = commit(t, groups[0], 0, 30)
	want[1] = commit(t, groups[1], 1000, 1030)
	for g, nodes := range groups {
		awaitValues(t, fmt.Sprint("group ", g), nodes, want[g])
	}

	stopped := -1
	for i, n := range groups[1] {
		if n == leaderOf(groups[1]) {
			stopped = i
			if err := n.r.Shutdown(); err != nil {
				t.Fatal(err)
			}
			groups[1][i] = nil
		}
	}
	want[0] = append(want[0], commit(t, groups[0], 30, 40)...)
	want[1] = append(want[1], commit(t, groups[1], 1030, 1040)...)
	groups[1][stopped] = startNode(t, groupOpts(base, ports, peers, stopped, 1), false)
	for g, nodes := range groups {
		awaitValues(t, fmt.Sprint("group ", g), nodes, want[g])
	}
}

// TestRaftPortSnapshotInGroup: a member added to group 1 after its
// leader compacted the log receives a snapshot over the shared port, its
// files pulled from group 1's store (group 0, on the same ports, holds
// none of them).
func TestRaftPortSnapshotInGroup(t *testing.T) {
	base := t.TempDir()
	ports, peers := portCluster(t, 3)
	meta, data := make([]*testNode, 3), make([]*testNode, 3)
	shutdownAll(t, meta, data)
	for i := range peers {
		meta[i] = startNode(t, groupOpts(base, ports, peers, i, 0), false)
	}
	// Group 1 starts on nodes 1 and 2; snapshots only when asked.
	dataOpts := func(i int) RaftOptions {
		o := groupOpts(base, ports, peers, i, 1)
		o.Peers, o.TrailingLogs, o.SnapshotThreshold, o.SnapshotInterval = peers[:2], 5, 1<<30, time.Hour
		return o
	}
	for i := range 2 {
		data[i] = startNode(t, dataOpts(i), false)
	}
	testwait.For(t, "group 0's leader", 20*time.Second, func() bool { return leaderOf(meta) != nil })
	testwait.For(t, "group 1's leader", 20*time.Second, func() bool { return leaderOf(data) != nil })
	wantMeta := commit(t, meta, 0, 20)
	want := commit(t, data, 1000, 1050)
	leader := leaderOf(data)
	if err := leader.r.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := leader.r.AddVoter(peers[2]); err != nil {
		t.Fatal(err)
	}
	// Node 3 starts empty and waits for the leader's snapshot before it
	// opens its state (awaitFirstContact).
	o := dataOpts(2)
	o.Join, o.StartWait = true, 30*time.Second
	data[2] = startNode(t, o, false)
	want = append(want, commit(t, data, 1050, 1060)...)
	awaitValues(t, "group 1", data, want)
	awaitValues(t, "group 0", meta, wantMeta)

	st := data[2].r.SnapshotTransfers()
	if st.Installs != 1 || st.PulledFiles == 0 || st.PulledBytes == 0 {
		t.Fatalf("node 3's group 1 transfers %+v: want one install whose files were pulled", st)
	}
	if served := data[0].r.SnapshotTransfers().ServedBytes + data[1].r.SnapshotTransfers().ServedBytes; served != st.PulledBytes {
		t.Fatalf("group 1's nodes served %d snapshot bytes, node 3 pulled %d", served, st.PulledBytes)
	}
	for _, n := range meta {
		if st := n.r.SnapshotTransfers(); st.Installs != 0 || st.ServedBytes != 0 {
			t.Fatalf("group 0 on node %d moved snapshot files: %+v", n.opts.Self.ID, st)
		}
	}
}
