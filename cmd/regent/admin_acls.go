package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/regent-broker/regent/actors/acls"
)

// maxACLForwardBytes bounds a forwarded ACL change and its answer.
const maxACLForwardBytes = 16 << 20

// serveACLs adds POST /acls/forward to the admin endpoint and makes the
// ACL store forward a follower's changes there on the leader: Kafka's
// clients send CreateAcls and DeleteAcls to any broker (KRaft brokers
// forward them to the controller), so a follower cannot just answer
// NOT_CONTROLLER. The forwarded request travels like the endpoint's own
// forwarding (a.client, over mutual TLS when cluster links are); the
// follower has already authorized it against the replicated ACLs; with a
// cluster secret the change must be signed (admin_auth.go).
func (a *adminServer) serveACLs(store *acls.Store) {
	mux, ok := a.srv.Handler.(*http.ServeMux)
	if !ok {
		a.logger.Error("admin endpoint has no mux: ACL changes on followers answer NOT_CONTROLLER")
		return
	}
	mux.HandleFunc("POST /acls/forward", a.auth.guard(maxACLForwardBytes, a.logger, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body) // bounded by guard
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(store.ServeForwarded(body))
	}))
	store.SetForwarder(func(ctx context.Context, body []byte) ([]byte, error) {
		leader, ok := a.nodes.Get(a.repl.Leader())
		if !ok || leader.Admin == "" {
			return nil, fmt.Errorf("no leader with an admin endpoint is known (leader %d)", a.repl.Leader())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.scheme+leader.Admin+"/acls/forward", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		a.auth.sign(req, body)
		resp, err := a.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("forward to leader %d: %w", leader.ID, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("forward to leader %d: %s", leader.ID, resp.Status)
		}
		return io.ReadAll(io.LimitReader(resp.Body, maxACLForwardBytes))
	})
}
