package netio

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/users"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/protocol/sasl"
)

type saslCreds map[string]users.Credential

func (c saslCreds) Lookup(u string, m users.Mechanism) (users.Credential, bool) {
	cr, ok := c[u]
	return cr, ok && cr.Mechanism == m
}

// startSASLServer serves the protocol server's SASL handlers (and
// ApiVersions) on a SASL_PLAINTEXT listener with user alice/pw.
func startSASLServer(t *testing.T) (string, *Server) {
	t.Helper()
	salt := []byte("salt")
	salted, err := users.SaltPassword(users.ScramSHA512, "pw", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := sasl.New(sasl.Config{Credentials: saslCreds{"alice": users.FromSaltedPassword(users.ScramSHA512, salted, salt, 4096)}})
	if err != nil {
		t.Fatal(err)
	}
	l := &protocol.Listener{Name: "SASL_PLAINTEXT", Security: protocol.SASLPlaintext,
		SASL: &protocol.SASLConfig{Auth: auth, FailureDelay: 50 * time.Millisecond}}
	return startServerWith(t, Config{Listener: l}, protocol.NewServer(protocol.Config{}, nil, nil, nil, nil))
}

func sendReq(t *testing.T, c net.Conn, corr int32, req kmsg.Request) {
	t.Helper()
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'x')
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

func recvFrame(t *testing.T, c net.Conn) ([]byte, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(lb[:]))
	_, err := io.ReadFull(c, b)
	return b, err
}

// closedByPeer reports whether the server closed c (EOF or reset) within
// the read deadline.
func closedByPeer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

func saslDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func authenticateV1(t *testing.T, c net.Conn, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	sendReq(t, c, 1, hs)
	if _, err := recvFrame(t, c); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version, au.SASLAuthBytes = 1, []byte("\x00alice\x00"+pass)
	sendReq(t, c, 2, au)
	b, err := recvFrame(t, c)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	if err := resp.ReadFrom(b[4:]); err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestSASLListenerGate: on a SASL listener the edge serves ApiVersions and
// the SASL keys before authentication and closes on anything else (counted
// as "auth"), bounds pre-auth frames to 64 KiB, serves a login in the
// legacy raw framing, and closes after a failed login once its answer is
// written. Run with -race: the auth state is changed off the event loop.
func TestSASLListenerGate(t *testing.T) {
	addr, srv := startSASLServer(t)

	c := saslDial(t, addr)
	sendReq(t, c, 1, kmsg.NewPtrApiVersionsRequest())
	if _, err := recvFrame(t, c); err != nil {
		t.Fatalf("ApiVersions before authentication: %v", err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	sendReq(t, c, 2, md)
	if !closedByPeer(t, c) {
		t.Fatal("Metadata before authentication: not closed")
	}

	c = saslDial(t, addr)
	frame := make([]byte, 4+(64<<10)+1)
	binary.BigEndian.PutUint32(frame, (64<<10)+1)
	go func() { _, _ = c.Write(frame) }()
	if !closedByPeer(t, c) {
		t.Fatal("a 64 KiB + 1 pre-auth frame: not closed")
	}

	c = saslDial(t, addr)
	if r := authenticateV1(t, c, "pw"); r.ErrorCode != 0 {
		t.Fatalf("login: %+v", r)
	}
	// Authenticated: a frame past 64 KiB is no longer refused for its size
	// (ApiVersions with a 100 KiB client software name is served).
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName = string(make([]byte, 100<<10))
	sendReq(t, c, 3, av)
	if _, err := recvFrame(t, c); err != nil {
		t.Fatalf("a large frame after authentication: %v", err)
	}

	c = saslDial(t, addr)
	if r := authenticateV1(t, c, "wrong"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil {
		t.Fatalf("wrong password: %+v", r)
	}
	if !closedByPeer(t, c) {
		t.Fatal("failed login: not closed")
	}

	c = saslDial(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, "PLAIN"
	sendReq(t, c, 1, hs)
	if _, err := recvFrame(t, c); err != nil {
		t.Fatal(err)
	}
	tok := "\x00alice\x00pw"
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)); err != nil {
		t.Fatal(err)
	}
	if b, err := recvFrame(t, c); err != nil || len(b) != 0 {
		t.Fatalf("raw PLAIN: %x %v", b, err)
	}
	sendReq(t, c, 2, kmsg.NewPtrApiVersionsRequest())
	if _, err := recvFrame(t, c); err != nil {
		t.Fatalf("after raw PLAIN: %v", err)
	}

	var auth int64
	for _, cs := range srv.MemoryStats().Closed {
		if cs.Reason == "auth" {
			auth = cs.Count
		}
	}
	if auth < 1 {
		t.Errorf("closes counted as auth: %d", auth)
	}
}
