package protocol

// Forwarding (Kafka's KIP-590, Regent's way): in a cluster only the raft
// leader can propose changes to replicated metadata, yet Kafka's clients
// send admin requests to any broker and expect an answer, not
// NOT_CONTROLLER. A follower hands such a request, with the principal and
// client address of its connection, to a Forwarder (cmd/regent carries it
// to the leader's admin endpoint, over the cluster's mutual TLS and/or
// signed with the cluster secret, so that only nodes can name a
// principal); the leader serves it as its own handler would, with the
// authorizer checking the original principal, and the follower answers the
// client with the leader's response once its own state holds the change
// (StateIndexer), so the client reads its write on the node it asked.
//
// While no leader is known, or the leader is not serving yet, the follower
// retries until the request's deadline (its timeout_ms, at most
// maxForwardWait), then answers REQUEST_TIMED_OUT, as Kafka's brokers do
// when their controller stays unreachable. A forward lost after it was
// sent also answers REQUEST_TIMED_OUT: the change may or may not be
// applied.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ForwardedRequest is a request a follower sends its leader to serve.
type ForwardedRequest struct {
	Key      int16  `json:"key"`
	Version  int16  `json:"version"`
	ClientID string `json:"client_id,omitempty"`
	// Principal is the client connection's principal ("User:NAME"), which
	// the leader's authorizer checks; ClientAddr its remote host:port, for
	// host ACLs.
	Principal  string `json:"principal"`
	ClientAddr string `json:"client_addr"`
	// SASL says the client authenticated with SASL, TokenAuth with a
	// delegation token (the delegation token requests check both).
	SASL      bool `json:"sasl,omitempty"`
	TokenAuth bool `json:"token_auth,omitempty"`
	// Node says a cluster node sends the request on its own behalf (a
	// transaction coordinator's markers to the leader of a partition's
	// raft group; nodeKeys): it is served on whichever node it reaches,
	// leader of the metadata group or not, and authorized as the node
	// itself (the forward endpoint admits only nodes).
	Node bool `json:"node,omitempty"`
	// Origin is the node that forwarded the request (0: unknown, a node
	// of an earlier version): share sessions are kept per member and
	// origin, as a client keeps one per broker it fetches from.
	Origin int32 `json:"origin,omitempty"`
	// Body is the request body at Version, without its header.
	Body []byte `json:"body"`
}

// Forwarder carries fr to node leader and returns the response body the
// leader encoded (at fr.Version, without its header) and the leader's
// state index once it had answered (StateIndexer; 0: unknown). An error wrapping
// ErrForwardRetry means the leader did not act on it (it could not be
// reached, or it was not serving): the caller may send it again. An error
// wrapping ErrForwardRefused means the leader refused it without acting.
// Any other error leaves the outcome unknown. It must honour ctx.
type Forwarder func(ctx context.Context, leader int32, fr ForwardedRequest) (body []byte, stateIndex uint64, err error)

// StateIndexer is implemented by cluster views that know how much of the
// replicated log this node's state holds (cluster.Raft.StateIndex). A
// follower answers a forwarded change only once its own state holds what
// the leader's held when it answered, so the client reads its write on the
// node it asked (bounded by forwardApplyWait).
type StateIndexer interface {
	StateIndex() uint64
}

var (
	// ErrForwardRetry: the forward reached no serving leader; nothing was done.
	ErrForwardRetry = errors.New("forwarded request not served by a leader")
	// ErrForwardRefused: the leader refused the forward without acting.
	ErrForwardRefused = errors.New("forwarded request refused")
	// ErrNotServing is ServeForwarded's answer on a node that is not the
	// serving leader; it wraps ErrForwardRetry.
	ErrNotServing = fmt.Errorf("%w: this node is not the serving cluster leader", ErrForwardRetry)
)

// errServeHere ends a forward: this node became the serving leader.
var errServeHere = errors.New("this node leads: serve locally")

const (
	// maxForwardWait bounds a forward: clients wait 30 s for an answer by
	// default (request.timeout.ms), so a longer wait only makes them send
	// the request again while the first may still be applied.
	maxForwardWait = 30 * time.Second
	// forwardBackoffMin and forwardBackoffMax pace the retries while no
	// leader serves (an election takes about a second).
	forwardBackoffMin = 25 * time.Millisecond
	forwardBackoffMax = 250 * time.Millisecond
	// forwardApplyWait bounds the wait for this node to apply what the
	// leader applied (one commit notice, normally milliseconds); the
	// answer goes out then even if the node lags.
	forwardApplyWait = time.Second
)

// forwardedKeys are the requests that change replicated metadata: a
// follower forwards them, and a leader serves only these for others.
var forwardedKeys = map[int16]bool{
	19: true, // CreateTopics
	20: true, // DeleteTopics
	21: true, // DeleteRecords
	30: true, // CreateAcls
	31: true, // DeleteAcls
	33: true, // AlterConfigs
	37: true, // CreatePartitions
	38: true, // CreateDelegationToken
	39: true, // RenewDelegationToken
	40: true, // ExpireDelegationToken
	44: true, // IncrementalAlterConfigs
	45: true, // AlterPartitionReassignments
	49: true, // AlterClientQuotas
	51: true, // AlterUserScramCredentials
	57: true, // UpdateFeatures
}

// leaderReadKeys are requests only the leader can answer that change no
// replicated state (it alone tracks what DescribeQuorum reports; it alone
// can hand leadership over): a follower forwards them as it forwards
// forwardedKeys, and answers as soon as the leader did, with no state
// change of its own to wait for.
// nodeKeys are the requests a node sends another on its own behalf
// (ForwardedRequest.Node), served where they arrive.
var nodeKeys = map[int16]bool{
	24: true, // AddPartitionsToTxn: a partition group's leader checks a batch with the coordinator
	27: true, // WriteTxnMarkers: markers for a partition group's leader
	28: true, // TxnOffsetCommit: a group's coordinator checks offsets with the transaction's
}

var leaderReadKeys = map[int16]bool{
	43: true, // ElectLeaders
	55: true, // DescribeQuorum
}

// SetForwarder installs how a follower reaches the leader (nil: requests
// are served where they arrive, followers answering NOT_CONTROLLER). Call
// before serving.
func (s *Server) SetForwarder(f Forwarder) { s.forwarder = f }

// forwardToLeader takes r to the leader when this node is a follower that
// can forward, and reports whether it did: the handlers of forwardedKeys
// and leaderReadKeys call it first and return when it is true. Requests
// served for another node, or after a forward found this node leading,
// are never forwarded.
func (s *Server) forwardToLeader(r *Request) bool {
	if s.forwarder == nil || r.local || s.cluster.Serving() || !(forwardedKeys[r.Key] || leaderReadKeys[r.Key]) {
		return false
	}
	go s.runForward(r)
	return true
}

// runForward forwards r and answers it; on its own goroutine.
func (s *Server) runForward(r *Request) {
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(r.Context(), "forward panicked", "api", kmsg.NameForKey(r.Key), "version", r.Version, "panic", p, "stack", string(debug.Stack()))
			r.Respond(errorResponse(r, p))
		}
	}()
	wait := maxForwardWait
	if tr, ok := r.Msg.(kmsg.TimeoutRequest); ok && tr.Timeout() > 0 && time.Duration(tr.Timeout())*time.Millisecond < wait {
		wait = time.Duration(tr.Timeout()) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	fr := forwardedFrom(r)
	fr.Origin = s.cfg.NodeID
	body, index, err := s.forwardTo(ctx, s.forwardTarget(r), fr)
	switch {
	case errors.Is(err, errServeHere):
		r.local = true
		s.Serve(r)
		return
	case err != nil:
		code, msg := forwardFailure(err)
		s.log.WarnContext(r.Context(), "request not forwarded to the leader", "api", kmsg.NameForKey(r.Key), "err", err)
		r.Respond(failedResponse(r.Msg, code, msg))
		return
	}
	resp := r.Msg.ResponseKind()
	resp.SetVersion(r.Version)
	if err := decodeResponse(resp, body); err != nil {
		msg := fmt.Sprintf("the leader's %s response does not decode: %v", kmsg.NameForKey(r.Key), err)
		r.Respond(failedResponse(r.Msg, kerr.UnknownServerError.Code, msg))
		return
	}
	if !leaderReadKeys[r.Key] && !shareForwardKeys[r.Key] {
		s.awaitStateIndex(ctx, index)
	}
	if tr, ok := resp.(kmsg.ThrottleResponse); ok {
		// The leader measured the client's quota (a mutation quota):
		// the client's connection here waits its throttle out.
		ms, _ := tr.Throttle()
		throttleConn(r, time.Now(), time.Duration(ms)*time.Millisecond)
	}
	r.Respond(resp)
}

// forwardFailure is the code and message a failed forward answers.
func forwardFailure(err error) (int16, string) {
	switch {
	case errors.Is(err, ErrForwardRefused):
		return kerr.UnknownServerError.Code, "the cluster leader refused the forwarded request: " + err.Error()
	case errors.Is(err, ErrForwardRetry):
		return kerr.RequestTimedOut.Code, "no cluster leader served the request in time (nothing was applied): " + err.Error()
	}
	return kerr.RequestTimedOut.Code, "the cluster leader did not answer in time; the change may or may not be applied: " + err.Error()
}

// forwardedFrom is r as a ForwardedRequest.
func forwardedFrom(r *Request) ForwardedRequest {
	fr := forwardedAs(r, r.Msg)
	fr.Key, fr.Version = r.Key, r.Version // as received (Msg's are the same)
	return fr
}

// forwardedAs is msg, asked of the leader on behalf of r's client: with
// r's client id, principal, address and how it authenticated, so the
// leader authorizes it as it would r (a follower's own question for
// Metadata catch-up or auto-creation).
func forwardedAs(r *Request, msg kmsg.Request) ForwardedRequest {
	fr := ForwardedRequest{Key: msg.Key(), Version: msg.GetVersion(), ClientID: r.ClientID, Principal: r.Conn.PrincipalName(), Body: msg.AppendTo(nil)}
	if r.Conn != nil {
		fr.ClientAddr = r.Conn.RemoteAddr
		fr.SASL, fr.TokenAuth = r.Conn.ViaSASL(), r.Conn.TokenAuth
	}
	return fr
}

// forward sends fr to the leader until one serves it or ctx ends. It
// returns the leader's response body and state index, errServeHere when
// this node is (or became) the serving leader, or the last error: wrapping
// ErrForwardRetry when nothing was done, else the outcome is unknown.
func (s *Server) forward(ctx context.Context, fr ForwardedRequest) ([]byte, uint64, error) {
	return s.forwardTo(ctx, s.cluster.Group(0), fr)
}

// forwardTo is forward to the leader of raft group g.
func (s *Server) forwardTo(ctx context.Context, g GroupView, fr ForwardedRequest) ([]byte, uint64, error) {
	self := s.cfg.NodeID
	backoff := forwardBackoffMin
	lastErr := fmt.Errorf("%w: no leader elected", ErrForwardRetry)
	for {
		leader := g.Leader()
		switch {
		case g.Serving():
			return nil, 0, errServeHere
		case leader >= 0 && leader != self:
			body, index, err := s.forwarder(ctx, leader, fr)
			if err == nil || !errors.Is(err, ErrForwardRetry) {
				return body, index, err
			}
			lastErr = err
		}
		// No leader, this node elected but not caught up, or a leader
		// that did not serve: wait for the next one.
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, 0, fmt.Errorf("%w (after %v)", lastErr, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, forwardBackoffMax)
	}
}

// ServeForwarded serves a request another node forwarded, as this node's
// handler serves its own clients', with the forwarded principal and client
// address, and returns the response body at fr.Version. It refuses with
// ErrNotServing unless this node is the serving leader (it never forwards
// again), and with an error wrapping ErrForwardRefused a key that is not
// forwarded or a body that does not decode. With the body it returns this
// node's state index once the handler answered (0: not known). Off the
// event loop only: it waits for the handler's answer or ctx's end.
func (s *Server) ServeForwarded(ctx context.Context, fr ForwardedRequest) ([]byte, uint64, error) {
	node := fr.Node && nodeKeys[fr.Key]
	// A share request is served by its group's coordinator; checked once
	// decoded.
	if !node && !shareForwardKeys[fr.Key] && !s.cluster.Serving() {
		return nil, 0, ErrNotServing
	}
	a, ok := apis[fr.Key]
	if !(forwardedKeys[fr.Key] || leaderReadKeys[fr.Key] || readForwardedKeys[fr.Key] || shareForwardKeys[fr.Key] || node) || !ok || fr.Version < a.min || fr.Version > a.max {
		return nil, 0, fmt.Errorf("%w: %s v%d is not forwarded here", ErrForwardRefused, kmsg.NameForKey(fr.Key), fr.Version)
	}
	msg := kmsg.RequestForKey(fr.Key)
	msg.SetVersion(fr.Version)
	if err := decodeBody(msg, fr.Body); err != nil {
		return nil, 0, fmt.Errorf("%w: %s v%d: %v", ErrForwardRefused, kmsg.NameForKey(fr.Key), fr.Version, err)
	}
	r := NewRequest(Header{Key: fr.Key, Version: fr.Version, ClientID: fr.ClientID}, msg)
	if shareForwardKeys[fr.Key] && !s.forwardTarget(r).Serving() {
		return nil, 0, ErrNotServing
	}
	r.Conn = &ConnInfo{RemoteAddr: fr.ClientAddr, Principal: fr.Principal, TokenAuth: fr.TokenAuth, forwardedSASL: fr.SASL, node: node, origin: fr.Origin}
	r.local = true
	frames := make(chan []byte, 1) // Respond calls reply once
	r.SetReply(func(frame []byte) { frames <- frame })
	s.Serve(r)
	select {
	case frame := <-frames:
		// The handler answered after its change was applied here.
		body, err := responseBody(frame, msg.IsFlexible())
		return body, s.stateIndex(), err
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("serving forwarded %s: %w", kmsg.NameForKey(fr.Key), ctx.Err())
	}
}

// stateIndex is this node's state index, 0 when the view does not know it.
func (s *Server) stateIndex() uint64 {
	if si, ok := s.cluster.(StateIndexer); ok {
		return si.StateIndex()
	}
	return 0
}

// awaitStateIndex waits until this node's state holds index, for at most
// forwardApplyWait or until ctx ends. The FSM has no notice of applies
// to wait on, so it looks every few milliseconds.
func (s *Server) awaitStateIndex(ctx context.Context, index uint64) {
	if index == 0 {
		return
	}
	si, ok := s.cluster.(StateIndexer)
	if !ok {
		return
	}
	deadline := time.Now().Add(forwardApplyWait)
	for si.StateIndex() < index && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// responseBody strips a response frame's length, correlation id and (when
// flexible) empty header tags, as AppendResponseFrame wrote them.
func responseBody(frame []byte, flexible bool) ([]byte, error) {
	n := 8
	if flexible {
		n++
	}
	if len(frame) < n {
		return nil, fmt.Errorf("response frame of %d bytes", len(frame))
	}
	return frame[n:], nil
}

// decodeResponse parses a response body, turning a decoder panic into an
// error.
func decodeResponse(resp kmsg.Response, body []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decode panic: %v", p)
		}
	}()
	return resp.ReadFrom(body)
}
