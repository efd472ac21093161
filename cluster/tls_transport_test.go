package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/netio/tlstest"
)

// mtlsTransport is a raft transport on mutual TLS with a certificate of ca.
func mtlsTransport(t *testing.T, ca *tlstest.CA, name string) *raft.NetworkTransport {
	t.Helper()
	tr, _ := mtlsPeer(t, ca, name)
	return tr
}

// mtlsPeer is a raft transport on mutual TLS, set up as NewRaft does (a
// muxStream serving the snapshot store returned, with one snapshot).
func mtlsPeer(t *testing.T, ca *tlstest.CA, name string) (*raft.NetworkTransport, *fetchPeer) {
	t.Helper()
	p, err := ca.Server(name)
	if err != nil {
		t.Fatal(err)
	}
	store, err := certs.New(certs.Files{Cert: p.CertFile, Key: p.KeyFile, CA: ca.CertFile, ClientAuth: certs.ClientAuthRequired})
	if err != nil {
		t.Fatal(err)
	}
	s, err := newTLSStream("127.0.0.1:0", nil, store.ServerConfig(), store.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	return transportPeer(t, s, name)
}

// transportPeer is a raft transport on inner as newRaftTransport sets it
// up: a muxStream serving a snapshot store that holds one snapshot, of a
// segment whose content is "segment of name".
func transportPeer(t *testing.T, inner raft.StreamLayer, name string) (*raft.NetworkTransport, *fetchPeer) {
	t.Helper()
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

// pullSegment pulls the segment of from's only snapshot (transportPeer's,
// holding "segment of " and from's name) through dial, a peer's fetch
// dialer, and returns its content.
func pullSegment(t *testing.T, from *fetchPeer, name string, dial func(string, time.Duration) (net.Conn, error)) (string, error) {
	t.Helper()
	metas, err := from.store.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("snapshots of %s: %v %v", name, metas, err)
	}
	fc := &fetchClient{addr: from.addr, id: metas[0].ID, dial: dial, deadline: time.Now().Add(30 * time.Second), budget: 30 * time.Second}
	defer fc.close()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fc.pull("p-0/00000000000000000000.log", 0, int64(len("segment of "+name)), f); err != nil {
		return "", err
	}
	return readFile(t, f.Name()), nil
}

// answer serves one RPC on tr with an empty success response.
func answer(tr *raft.NetworkTransport) {
	go func() {
		select {
		case rpc := <-tr.Consumer():
			rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
		case <-time.After(10 * time.Second):
		}
	}()
}

func TestRaftTransportMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "cluster-ca")
	if err != nil {
		t.Fatal(err)
	}
	a, pa := mtlsPeer(t, ca, "node1")
	b, pb := mtlsPeer(t, ca, "node2")
	appendOnce := func(from *raft.NetworkTransport) error {
		answer(b)
		var resp raft.AppendEntriesResponse
		return from.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte(a.LocalAddr())}, Term: 1}, &resp)
	}
	if err := appendOnce(a); err != nil {
		t.Fatalf("append between nodes with cluster certificates: %v", err)
	}

	// A node whose certificate another CA signed cannot join.
	other, err := tlstest.NewCA(t.TempDir(), "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	stranger, ps := mtlsPeer(t, other, "stranger")
	var resp raft.AppendEntriesResponse
	if err := stranger.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); err == nil {
		t.Fatal("a node with a foreign certificate reached raft")
	}

	// Snapshot files on the same port, on the same mutual TLS: a node of
	// the cluster pulls them, a node with a foreign certificate cannot.
	if got, err := pullSegment(t, pb, "node2", pa.mux.dialFetch); err != nil || got != "segment of node2" {
		t.Fatalf("a cluster node's fetch over TLS: %q, %v", got, err)
	}
	if _, err := pullSegment(t, pb, "node2", ps.mux.dialFetch); err == nil {
		t.Fatal("a node with a foreign certificate pulled snapshot files")
	}

	// A TLS dial without a client certificate, and plaintext, are refused
	// before raft reads anything.
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	if c, err := tls.Dial("tcp", string(b.LocalAddr()), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}); err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write([]byte{0}) // rpcAppendEntries
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a dial without a client certificate was answered")
		}
		c.Close()
	}
	raw, err := net.DialTimeout("tcp", string(b.LocalAddr()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = raw.Write([]byte{0, 0x81, 0xa0})
	buf := make([]byte, 256)
	for {
		if _, err := raw.Read(buf); err != nil {
			break // an alert at most, then the close
		}
	}
	raw.Close()

	// The cluster's own nodes still talk.
	if err := appendOnce(a); err != nil {
		t.Fatalf("append after the refusals: %v", err)
	}
}
