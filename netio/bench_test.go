package netio

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/netio/certs"
	"github.com/regent-broker/regent/netio/tlstest"
	"github.com/regent-broker/regent/protocol"
)

// echoHandler answers ApiVersions at once, on the loop: the benchmark
// measures the edge (framing, dispatch, ordering, writes), not handlers.
type echoHandler struct{}

func (echoHandler) Decode(h protocol.Header, body []byte) (*protocol.Request, error) {
	return slowHandler{}.Decode(h, body)
}

func (echoHandler) Serve(r *protocol.Request) { r.Respond(&kmsg.ApiVersionsResponse{}) }

// startBenchServer starts a server on a free loopback port until b ends.
func startBenchServer(b *testing.B, cfg Config, h Handler) (string, *Server) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Addr = l.Addr().String()
	l.Close()
	cfg.Logger = slog.New(slog.DiscardHandler)
	s := New(cfg, h)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	select {
	case <-s.Booted():
	case err := <-done:
		b.Fatalf("server: %v", err)
	case <-time.After(10 * time.Second):
		b.Fatal("server did not boot")
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
		<-done
	})
	return cfg.Addr, s
}

// benchPipelined sends b.N ApiVersions requests on one connection, 64 in
// flight, and reads every answer.
func benchPipelined(b *testing.B, c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	const window = 64
	var batch []byte
	for i := range window {
		batch = append(batch, apiVersionsFrame(int32(i))...)
	}
	r := bufio.NewReaderSize(c, 1<<16)
	done := make(chan error, 1)
	go func() {
		var hdr [4]byte
		for i := 0; i < b.N; i++ {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				done <- err
				return
			}
			n := int(hdr[0])<<24 | int(hdr[1])<<16 | int(hdr[2])<<8 | int(hdr[3])
			if _, err := r.Discard(n); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.ResetTimer()
	for sent := 0; sent < b.N; sent += window {
		k := min(window, b.N-sent)
		if _, err := c.Write(batch[:k*len(batch)/window]); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPipelinedPlaintext(b *testing.B) {
	addr, _ := startBenchServer(b, Config{}, echoHandler{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchPipelined(b, c)
}

func BenchmarkPipelinedTLS(b *testing.B) {
	f := newTLSFixture(b)
	store, err := certs.New(certs.Files{Cert: f.server.CertFile, Key: f.server.KeyFile})
	if err != nil {
		b.Fatal(err)
	}
	addr, _ := startBenchServer(b, Config{TLS: store.ServerConfig()}, echoHandler{})
	c, err := tls.Dial("tcp", addr, clientConfig(b, f.ca.CertFile, tlstest.Pair{}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchPipelined(b, c)
}
