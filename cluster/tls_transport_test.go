package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/netio/tlstest"
)

// mtlsTransport is a raft transport on mutual TLS with a certificate of ca.
func mtlsTransport(t *testing.T, ca *tlstest.CA, name string) *raft.NetworkTransport {
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
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: s, MaxPool: 2, Timeout: 5 * time.Second})
	t.Cleanup(func() { _ = tr.Close() })
	return tr
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
	a, b := mtlsTransport(t, ca, "node1"), mtlsTransport(t, ca, "node2")
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
	stranger := mtlsTransport(t, other, "stranger")
	var resp raft.AppendEntriesResponse
	if err := stranger.AppendEntries("2", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); err == nil {
		t.Fatal("a node with a foreign certificate reached raft")
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
