package cluster

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// secretPeer is a raft transport on plaintext links authenticated by
// secrets (none: open; the first is proved, any accepted), set up as newRaftTransport does, with a muxStream
// serving one snapshot.
func secretPeer(t *testing.T, name string, secrets ...[]byte) (*raft.NetworkTransport, *fetchPeer) {
	t.Helper()
	tcp, err := newTCPStream("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	var inner raft.StreamLayer = tcp
	if len(secrets) > 0 {
		inner = newSecretStream(tcp, secrets, slog.New(slog.DiscardHandler))
	}
	return transportPeer(t, inner, name)
}

func TestRaftTransportSecretLinks(t *testing.T) {
	secret := bytes.Repeat([]byte("s"), 32)
	a, pa := secretPeer(t, "node1", secret)
	b, pb := secretPeer(t, "node2", secret)
	appendFrom := func(from *raft.NetworkTransport) error {
		answer(b)
		var resp raft.AppendEntriesResponse
		return from.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(a.LocalAddr())}, Term: 1}, &resp)
	}
	if err := appendFrom(a); err != nil {
		t.Fatalf("append between nodes with the cluster secret: %v", err)
	}

	// A node with another secret, and one with none, cannot reach raft.
	stranger, ps := secretPeer(t, "stranger", bytes.Repeat([]byte("x"), 32))
	var resp raft.AppendEntriesResponse
	if err := stranger.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); !errors.Is(err, errLinkAuth) {
		t.Fatalf("a node with another secret: %v, want the link refused", err)
	}
	open, _ := secretPeer(t, "open")
	if err := open.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); err == nil {
		t.Fatal("a node without a secret reached raft")
	}

	// Snapshot files on the same port, behind the same exchange.
	if got, err := pullSegment(t, pb, "node2", pa.mux.dialFetch); err != nil || got != "segment of node2" {
		t.Fatalf("a cluster node's fetch: %q, %v", got, err)
	}
	if _, err := pullSegment(t, pb, "node2", ps.mux.dialFetch); err == nil {
		t.Fatal("a node with another secret pulled snapshot files")
	}

	// A plaintext raft RPC, and a replayed hello, are closed unanswered.
	for name, first := range map[string][]byte{
		"raft rpc": {0, 0x81, 0xa0},
		"hello":    append(bytes.Clone(linkMagic), make([]byte, linkNonceLen)...),
	} {
		raw, err := net.DialTimeout("tcp", string(b.LocalAddr()), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = raw.Write(first)
		if name == "hello" {
			// The answer carries a fresh nonce; a proof from another
			// connection's exchange cannot match it.
			if _, err := io.ReadFull(raw, make([]byte, linkNonceLen+linkMACLen)); err != nil {
				t.Fatalf("no answer to a hello: %v", err)
			}
			_, _ = raw.Write(make([]byte, linkMACLen))
		}
		// Closed: an end of stream, or a reset (the server closed with
		// bytes unread); a timeout means it kept the connection open.
		n, err := io.Copy(io.Discard, raw)
		var ne net.Error
		if n != 0 || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: %d bytes more, then %v; want the connection closed", name, n, err)
		}
		raw.Close()
	}

	// The cluster's own nodes still talk.
	if err := appendFrom(a); err != nil {
		t.Fatalf("append after the refusals: %v", err)
	}
}

// The cluster secret is rotated one node at a time: each step's pair of
// nodes talks both ways, and a node on one secret alone cannot talk to a
// node on the other alone.
func TestRaftSecretLinksRotate(t *testing.T) {
	oldS, newS := bytes.Repeat([]byte("o"), 32), bytes.Repeat([]byte("n"), 32)
	talk := func(from, to *raft.NetworkTransport) error {
		answer(to)
		var resp raft.AppendEntriesResponse
		return from.AppendEntries("x", to.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("y"), Addr: []byte(from.LocalAddr())}, Term: 1}, &resp)
	}
	steps := []struct {
		name string
		a, b [][]byte
	}{
		{"b accepts the new secret", [][]byte{oldS}, [][]byte{oldS, newS}},
		{"b proves the new secret, a accepts it", [][]byte{oldS, newS}, [][]byte{newS, oldS}},
		{"a on the new secret alone", [][]byte{newS}, [][]byte{newS, oldS}},
	}
	for _, st := range steps {
		a, _ := secretPeer(t, "a", st.a...)
		b, _ := secretPeer(t, "b", st.b...)
		if err := talk(a, b); err != nil {
			t.Errorf("%s: a to b: %v", st.name, err)
		}
		if err := talk(b, a); err != nil {
			t.Errorf("%s: b to a: %v", st.name, err)
		}
	}
	onOld, _ := secretPeer(t, "old", oldS)
	onNew, _ := secretPeer(t, "new", newS)
	var resp raft.AppendEntriesResponse
	if err := onOld.AppendEntries("x", onNew.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); !errors.Is(err, errLinkAuth) {
		t.Errorf("old secret alone to new alone: %v, want the link refused", err)
	}
	if err := onNew.AppendEntries("x", onOld.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); !errors.Is(err, errLinkAuth) {
		t.Errorf("new secret alone to old alone: %v, want the link refused", err)
	}
}
