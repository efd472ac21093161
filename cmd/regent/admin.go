package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/netio/certs"
)

// adminServer is the node's HTTP admin endpoint in cluster mode:
//
//	GET    /cluster/status        this node's view (regent cluster status)
//	POST   /cluster/voters        add a voter: a cluster.Peer as JSON
//	DELETE /cluster/voters/{id}   remove a voter
//	POST   /acls/forward          a follower's ACL change (admin_acls.go)
//	POST   /kafka/forward         a follower's admin request (admin_forward.go)
//
// Membership changes run on the leader; other nodes forward them there.
// Every POST and DELETE passes auth.guard: signed with the cluster secret
// when one is set (admin_auth.go), and of bounded size.
type adminServer struct {
	repl   *cluster.Raft
	nodes  *cluster.Nodes
	logger *slog.Logger
	srv    *http.Server
	// client and scheme forward to the leader's endpoint: https with this
	// node's certificate when cluster links are over mutual TLS.
	client *http.Client
	scheme string
	// auth signs this node's requests to other nodes' endpoints and
	// verifies the ones it serves; nil without a cluster secret.
	auth *linkAuth
	// groups are the node's partition raft groups (nil: none), set
	// before serving: membership changes reach their voters too.
	groups *partitionGroups
}

// startAdmin serves the admin endpoint on addr; with linkCerts (non-nil) over
// TLS that requires a client certificate of the cluster CA, so only
// nodes and holders of a cluster certificate may read or change it; with
// auth (non-nil) changes must be signed with the cluster secret.
func startAdmin(addr string, repl *cluster.Raft, groups *partitionGroups, nodes *cluster.Nodes, linkCerts *certs.Store, auth *linkAuth, logger *slog.Logger) (*adminServer, error) {
	a := &adminServer{repl: repl, groups: groups, nodes: nodes, auth: auth, logger: logger.With("component", "admin")}
	a.client, a.scheme = adminHTTP(linkCerts, 60*time.Second)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cluster/status", a.status)
	mux.HandleFunc("POST /cluster/voters", a.auth.guard(maxMembershipBytes, a.logger, a.addVoter))
	mux.HandleFunc("DELETE /cluster/voters/{id}", a.auth.guard(maxMembershipBytes, a.logger, a.removeVoter))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listen %s: %w", addr, err)
	}
	// net/http's own errors (TLS handshakes refused) go to our log.
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn)}
	if linkCerts != nil {
		l = tls.NewListener(l, linkCerts.ServerConfig())
	}
	go func() {
		if err := a.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.logger.Warn("admin endpoint stopped", "err", err)
		}
	}()
	a.logger.Info("admin endpoint listening", "addr", addr)
	return a, nil
}

func (a *adminServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = a.srv.Shutdown(ctx)
}

// maxMembershipBytes bounds a membership change's body (one cluster.Peer).
const maxMembershipBytes = 1 << 16

func (a *adminServer) status(w http.ResponseWriter, _ *http.Request) {
	st := a.repl.Status(a.nodes.Get)
	st.Groups = a.groups.statuses()
	if n, set := a.nodes.CoordinatorShards(); set {
		st.CoordinatorShards = &n
	}
	writeJSON(w, http.StatusOK, st)
}

// forward sends a membership change to the leader's admin endpoint;
// it reports false when this node should handle it itself.
func (a *adminServer) forward(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if a.repl.Ready() {
		return false
	}
	if r.Header.Get("X-Regent-Forwarded") != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "forwarded to a node that is not the leader; retry"})
		return true
	}
	leader, ok := a.nodes.Get(a.repl.Leader())
	if !ok || leader.Admin == "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf("no leader with an admin endpoint is known (leader %d)", a.repl.Leader())})
		return true
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, a.scheme+leader.Admin+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return true
	}
	req.Header.Set("X-Regent-Forwarded", "1")
	req.Header.Set("Content-Type", "application/json")
	a.auth.sign(req, body)
	resp, err := a.client.Do(req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": fmt.Sprintf("forward to leader %d: %v", leader.ID, err)})
		return true
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return true
}

func (a *adminServer) addVoter(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body) // bounded by guard
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	var p cluster.Peer
	if err := json.Unmarshal(body, &p); err != nil || p.ID <= 0 || p.Raft == "" || p.Kafka == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"id\":N,\"kafka\":\"host:port\",\"raft\":\"host:port\",\"admin\":\"host:port\"} with a positive id"})
		return
	}
	if a.forward(w, r, body) {
		return
	}
	// The directory entry first, so Metadata can name the node as soon as
	// it is a voter.
	if err := proposeWait(a.repl, cluster.NodesKey, cluster.UpsertNode(p)); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	if err := a.repl.AddVoter(p); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	// Then every partition group, through its leader (a retry of the
	// whole request repeats what was done, harmlessly).
	if err := a.changeGroupVoters(true, p); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	a.logger.Info("voter added", "node", p.ID, "raft", p.Raft, "kafka", p.Kafka)
	writeJSON(w, http.StatusOK, a.repl.Status(a.nodes.Get))
}

func (a *adminServer) removeVoter(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "voter id must be a positive integer"})
		return
	}
	if a.forward(w, r, nil) {
		return
	}
	// The partition groups first: removing this node from the metadata
	// group makes it step down, and it could not reach them after.
	if err := a.changeGroupVoters(false, cluster.Peer{ID: int32(id)}); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	if err := a.repl.RemoveVoter(int32(id)); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	// Removing the leader itself makes it step down; the entry then stays
	// in the directory, harmless, as Metadata lists voters only.
	if err := proposeWait(a.repl, cluster.NodesKey, cluster.RemoveNode(int32(id))); err != nil {
		a.logger.Info("voter removed; directory entry kept", "node", id, "err", err)
	}
	a.logger.Info("voter removed", "node", id)
	writeJSON(w, http.StatusOK, a.repl.Status(a.nodes.Get))
}

// proposeWait proposes cmd and waits up to 30s for it to be applied; off
// the event loop only (admin requests, startup). The error wraps
// replication.ErrNotLeader, or ErrOutcomeUnknown when the directory change
// may or may not have been applied, or is Apply's own.
func proposeWait(r replication.Replicator, key string, cmd replication.Command) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := replication.ProposeWait[any](ctx, r, key, cmd)
	return err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
