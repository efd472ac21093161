package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/protocol"
)

// TestForwardKafkaOutcomes: what the follower's side of a forward makes of
// each answer of the leader's endpoint: retried when nothing reached a
// serving leader, refused, unknown, or the body with the state index.
func TestForwardKafkaOutcomes(t *testing.T) {
	var status int
	var got protocol.ForwardedRequest
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/kafka/forward" {
			http.NotFound(w, r)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("leader: %v", err)
		}
		w.Header().Set(stateIndexHeader, "42")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("body"))
	}))
	defer leader.Close()
	// A port nothing listens on: the dial is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	nodes, err := cluster.OpenNodes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []cluster.Peer{
		{ID: 1, Kafka: "127.0.0.1:1", Raft: "127.0.0.1:2", Admin: strings.TrimPrefix(leader.URL, "http://")},
		{ID: 2, Kafka: "127.0.0.1:3", Raft: "127.0.0.1:4", Admin: dead},
		{ID: 3, Kafka: "127.0.0.1:5", Raft: "127.0.0.1:6"},
	} {
		if res := nodes.Apply(cluster.UpsertNode(p)); res != nil {
			if err, ok := res.(error); ok {
				t.Fatal(err)
			}
		}
	}
	a := &adminServer{nodes: nodes, scheme: "http://", client: &http.Client{Timeout: 10 * time.Second}}
	client := forwardClient(a.client)
	fr := protocol.ForwardedRequest{Key: 19, Version: 7, Principal: "User:alice", ClientAddr: "10.0.0.1:5000", Body: []byte{1, 2, 3}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	status = http.StatusOK
	body, index, err := a.forwardKafka(ctx, client, 1, fr)
	if err != nil || string(body) != "body" || index != 42 {
		t.Fatalf("200: %q %d %v", body, index, err)
	}
	if got.Principal != "User:alice" || got.ClientAddr != "10.0.0.1:5000" || string(got.Body) != "\x01\x02\x03" || got.Key != 19 || got.Version != 7 {
		t.Fatalf("the leader received %+v", got)
	}
	for _, c := range []struct {
		leader  int32
		status  int
		retry   bool
		refused bool
	}{
		{1, http.StatusServiceUnavailable, true, false}, // not serving
		{1, http.StatusBadRequest, false, true},
		{1, http.StatusGatewayTimeout, false, false}, // outcome unknown
		{2, 0, true, false},                          // dial refused
		{3, 0, true, false},                          // no admin endpoint known
		{9, 0, true, false},                          // not in the directory
	} {
		status = c.status
		_, _, err := a.forwardKafka(ctx, client, c.leader, fr)
		if err == nil || errors.Is(err, protocol.ErrForwardRetry) != c.retry || errors.Is(err, protocol.ErrForwardRefused) != c.refused {
			t.Errorf("leader %d, status %d: %v (want retry %v, refused %v)", c.leader, c.status, err, c.retry, c.refused)
		}
	}
}

// TestForwardKafkaSigned: with a cluster secret the follower signs its
// forward and the leader's endpoint serves it; a leader with another
// secret refuses it unread (401), which the follower takes as refused.
func TestForwardKafkaSigned(t *testing.T) {
	leaderAuth, err := newLinkAuth([]byte(strings.Repeat("L", minSecretBytes)))
	if err != nil {
		t.Fatal(err)
	}
	var served int
	leader := httptest.NewServer(leaderAuth.guard(maxForwardBytes, slog.New(slog.DiscardHandler), func(w http.ResponseWriter, r *http.Request) {
		served++
		_, _ = w.Write([]byte("body"))
	}))
	defer leader.Close()
	nodes, err := cluster.OpenNodes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res := nodes.Apply(cluster.UpsertNode(cluster.Peer{ID: 1, Kafka: "127.0.0.1:1", Raft: "127.0.0.1:2", Admin: strings.TrimPrefix(leader.URL, "http://")})); res != nil {
		if err, ok := res.(error); ok {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fr := protocol.ForwardedRequest{Key: 30, Version: 3, Principal: "User:admin", Body: []byte{0}}
	for _, c := range []struct {
		secret  string
		refused bool
	}{
		{strings.Repeat("L", minSecretBytes), false},
		{strings.Repeat("F", minSecretBytes), true},
		{"", true}, // unsigned
	} {
		a := &adminServer{nodes: nodes, scheme: "http://", client: &http.Client{Timeout: 10 * time.Second}}
		if c.secret != "" {
			if a.auth, err = newLinkAuth([]byte(c.secret)); err != nil {
				t.Fatal(err)
			}
		}
		body, _, err := a.forwardKafka(ctx, forwardClient(a.client), 1, fr)
		if c.refused != (err != nil) || (err != nil && !errors.Is(err, protocol.ErrForwardRefused)) || (err == nil && string(body) != "body") {
			t.Errorf("secret %q: %q %v (want refused %v)", c.secret[:min(1, len(c.secret))], body, err, c.refused)
		}
	}
	if served != 1 {
		t.Fatalf("the leader served %d forwards, want 1", served)
	}
}
