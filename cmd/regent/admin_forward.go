package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/regent-broker/regent/protocol"
)

// maxForwardBytes bounds a forwarded request or response body (JSON with
// the Kafka body in base64): admin requests are small, a CreateTopics of
// thousands of topics a few MiB.
const maxForwardBytes = 64 << 20

// stateIndexHeader carries the leader's state index with a forward's
// answer (protocol.StateIndexer).
const stateIndexHeader = "X-Regent-State-Index"

// serveForwarding adds POST /kafka/forward to the admin endpoint and makes
// srv forward a follower's changes to replicated metadata there on the
// leader (protocol/forward.go). The hop is the endpoint's own: a.client,
// over mutual TLS with the cluster CA when cluster links are, and signed
// with the cluster secret when one is set (admin_auth.go), so only nodes
// (and holders of a cluster certificate or the secret) can forward, and
// the principal a forward carries is as trusted as the membership changes
// the endpoint accepts. The leader authorizes that principal. With
// neither (Config.Validate refuses that) nothing is forwarded: followers
// answer NOT_CONTROLLER.
func (a *adminServer) serveForwarding(srv *protocol.Server) {
	mux, ok := a.srv.Handler.(*http.ServeMux)
	if !ok {
		a.logger.Error("admin endpoint has no mux: admin requests on followers answer NOT_CONTROLLER")
		return
	}
	if a.scheme == "http://" && a.auth == nil {
		// The endpoint could not tell a node from anyone else who
		// reaches it, and a forward names its principal.
		a.logger.Error("admin requests are not forwarded (followers answer NOT_CONTROLLER): the admin endpoint is plaintext and no --cluster-secret-file is set")
		return
	}
	mux.HandleFunc("POST /kafka/forward", a.auth.guard(maxForwardBytes, a.logger, func(w http.ResponseWriter, r *http.Request) {
		var fr protocol.ForwardedRequest
		if err := json.NewDecoder(r.Body).Decode(&fr); err != nil { // bounded by guard
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "forwarded request: " + err.Error()})
			return
		}
		body, index, err := srv.ServeForwarded(r.Context(), fr)
		switch {
		case errors.Is(err, protocol.ErrNotServing):
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		case errors.Is(err, protocol.ErrForwardRefused):
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		case err != nil:
			writeJSON(w, http.StatusGatewayTimeout, map[string]string{"error": err.Error()})
		default:
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set(stateIndexHeader, strconv.FormatUint(index, 10))
			_, _ = w.Write(body)
		}
	}))
	client := forwardClient(a.client)
	srv.SetForwarder(func(ctx context.Context, leader int32, fr protocol.ForwardedRequest) ([]byte, uint64, error) {
		return a.forwardKafka(ctx, client, leader, fr)
	})
}

// forwardClient is base (the admin endpoint's client, with its TLS) on a
// new connection per forward: a pooled connection to a leader that just
// died fails only after the request was written (EOF), an outcome the
// follower cannot tell from a leader that died applying it, while a dial
// to it fails before anything is sent and is retried on the next leader.
// Forwards are admin requests: rare enough for a handshake each.
func forwardClient(base *http.Client) *http.Client {
	tr := &http.Transport{}
	if bt, ok := base.Transport.(*http.Transport); ok {
		tr = bt.Clone()
	}
	tr.DisableKeepAlives = true
	return &http.Client{Timeout: base.Timeout, Transport: tr}
}

// forwardKafka is the protocol.Forwarder: it posts fr to node leader's
// admin endpoint with client. A leader that cannot be dialled or is not
// serving is ErrForwardRetry (nothing reached a serving leader); a refusal
// is ErrForwardRefused; anything after the request was sent leaves the
// outcome unknown.
func (a *adminServer) forwardKafka(ctx context.Context, client *http.Client, leader int32, fr protocol.ForwardedRequest) ([]byte, uint64, error) {
	node, ok := a.nodes.Get(leader)
	if !ok || node.Admin == "" {
		return nil, 0, fmt.Errorf("%w: leader %d has no known admin endpoint", protocol.ErrForwardRetry, leader)
	}
	raw, err := json.Marshal(fr)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: encode: %v", protocol.ErrForwardRefused, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.scheme+node.Admin+"/kafka/forward", bytes.NewReader(raw))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", protocol.ErrForwardRefused, err)
	}
	req.Header.Set("Content-Type", "application/json")
	a.auth.sign(req, raw)
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, 0, fmt.Errorf("%w: forward to leader %d: %v", protocol.ErrForwardRetry, leader, err)
		}
		return nil, 0, fmt.Errorf("forward to leader %d: %w", leader, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardBytes))
	if err != nil {
		return nil, 0, fmt.Errorf("forward to leader %d: read the answer: %w", leader, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		// A missing or malformed index is 0: no wait.
		index, _ := strconv.ParseUint(resp.Header.Get(stateIndexHeader), 10, 64)
		return body, index, nil
	case http.StatusServiceUnavailable:
		return nil, 0, fmt.Errorf("%w: leader %d: %s", protocol.ErrForwardRetry, leader, bytes.TrimSpace(body))
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
		// Refused, or a node that does not serve forwards.
		return nil, 0, fmt.Errorf("%w: leader %d: %s", protocol.ErrForwardRefused, leader, bytes.TrimSpace(body))
	case http.StatusUnauthorized:
		// Refused before it was served: the nodes' cluster secrets
		// differ, or their clocks.
		return nil, 0, fmt.Errorf("%w: leader %d refused this node's signature (do the nodes share one --cluster-secret-file, and clocks within %v?): %s", protocol.ErrForwardRefused, leader, linkSkew, bytes.TrimSpace(body))
	}
	return nil, 0, fmt.Errorf("forward to leader %d: %s: %s", leader, resp.Status, bytes.TrimSpace(body))
}
