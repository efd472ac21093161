package cluster

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// secretPeer is a raft transport on plaintext links authenticated by
// secret (nil: none), set up as newRaftTransport does, with a muxStream
// serving one snapshot.
func secretPeer(t *testing.T, secret []byte, name string) (*raft.NetworkTransport, *fetchPeer) {
	t.Helper()
	tcp, err := newTCPStream("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	var inner raft.StreamLayer = tcp
	if secret != nil {
		inner = newSecretStream(tcp, secret, slog.New(slog.DiscardHandler))
	}
	root := t.TempDir()
	fp := &fetchPeer{state: filepath.Join(root, "state"), raft: filepath.Join(root, "raft"), addr: inner.Addr().String()}
	fp.store = newTestStore(t, filepath.Join(fp.raft, "snapshots"), 2)
	fp.store.setFetch(fp.addr, fp.state, nil)
	fp.mux = newMuxStream(inner, slog.New(slog.DiscardHandler), fp.store.server.serve)
	fp.store.dialFetch = fp.mux.dialFetch
	writeFile(t, filepath.Join(fp.state, "p-0", "00000000000000000000.log"), "segment of "+name)
	takeSnapshot(t, fp.store, fp.state, fp.raft, 1)
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: fp.mux, MaxPool: 2, Timeout: 5 * time.Second})
	t.Cleanup(func() { _ = tr.Close() })
	return tr, fp
}

func TestRaftTransportSecretLinks(t *testing.T) {
	secret := bytes.Repeat([]byte("s"), 32)
	a, pa := secretPeer(t, secret, "node1")
	b, pb := secretPeer(t, secret, "node2")
	appendFrom := func(from *raft.NetworkTransport) error {
		answer(b)
		var resp raft.AppendEntriesResponse
		return from.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(a.LocalAddr())}, Term: 1}, &resp)
	}
	if err := appendFrom(a); err != nil {
		t.Fatalf("append between nodes with the cluster secret: %v", err)
	}

	// A node with another secret, and one with none, cannot reach raft.
	stranger, ps := secretPeer(t, bytes.Repeat([]byte("x"), 32), "stranger")
	var resp raft.AppendEntriesResponse
	if err := stranger.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); !errors.Is(err, errLinkAuth) {
		t.Fatalf("a node with another secret: %v, want the link refused", err)
	}
	open, _ := secretPeer(t, nil, "open")
	if err := open.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); err == nil {
		t.Fatal("a node without a secret reached raft")
	}

	// Snapshot files on the same port, behind the same exchange.
	metas, err := pb.store.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("node2's snapshots: %v %v", metas, err)
	}
	pull := func(dial func(string, time.Duration) (net.Conn, error)) (string, error) {
		fc := &fetchClient{addr: pb.addr, id: metas[0].ID, dial: dial, deadline: time.Now().Add(30 * time.Second), budget: 30 * time.Second}
		defer fc.close()
		f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := fc.pull("p-0/00000000000000000000.log", 0, int64(len("segment of node2")), f); err != nil {
			return "", err
		}
		return readFile(t, f.Name()), nil
	}
	if got, err := pull(pa.mux.dialFetch); err != nil || got != "segment of node2" {
		t.Fatalf("a cluster node's fetch: %q, %v", got, err)
	}
	if _, err := pull(ps.mux.dialFetch); err == nil {
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
