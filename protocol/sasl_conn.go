package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/protocol/sasl"
)

// SecurityProtocol is a listener's security protocol, as Kafka names it.
type SecurityProtocol string

// Kafka's security protocols.
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// SASL reports whether clients authenticate with SASL on p.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Listener is what a connection knows of the listener it came in on.
// Shared by the listener's connections; never changed once serving.
type Listener struct {
	Name     string // as in --listeners: PLAINTEXT, SASL_PLAINTEXT, or a custom name
	Security SecurityProtocol
	// Advertised is the address Metadata, DescribeCluster and
	// FindCoordinator give for this node to clients of this listener
	// (zero: the node's default).
	Advertised BrokerAddr
	// Peer gives another node's address on the listener of this name, as
	// that node advertises it (nil, or ok false: the node's default
	// address). Safe from any goroutine.
	Peer func(id int32) (addr BrokerAddr, ok bool)
	// SASL is how connections authenticate; set when Security.SASL().
	SASL *SASLConfig
}

// SASLConfig is how a SASL listener's connections authenticate.
type SASLConfig struct {
	Auth *sasl.Authenticator
	// ReauthAfter is connections.max.reauth.ms: a session lasts this long
	// (or until its OAUTHBEARER token expires, if sooner), after which the
	// client must re-authenticate on the connection or be closed. 0: off.
	ReauthAfter time.Duration
	// FailureDelay is the wait between a failed authentication's answer
	// and the close (default 250 ms): it slows password guessing down.
	FailureDelay time.Duration
	// Observer hears of every failure (nil: only logged).
	Observer AuthObserver
	Logger   *slog.Logger
}

// AuthObserver is told of authentication failures (telemetry/ counts them
// as regent_auth_failures_total). Must not block.
type AuthObserver interface {
	AuthFailed(ctx context.Context, mechanism, reason string)
}

// PreAuthMaxFrame bounds a request frame before authentication, as
// Kafka's SASL server bounds its receive (sasl receive buffer).
const PreAuthMaxFrame = 64 << 10

// saslPhase is where a connection is in its SASL exchange.
type saslPhase uint8

const (
	phaseHandshake    saslPhase = iota // waiting for SaslHandshake (also once authenticated: reauth)
	phaseAuthenticate                  // after SaslHandshake v1: SaslAuthenticate requests
	phaseRaw                           // after SaslHandshake v0: raw length-prefixed tokens
	phaseFailed                        // refused: closing
)

// ConnAuth is one SASL connection's authentication state. The network
// edge reads its flags lock-free on the event loop (Admits, PreAuth, Raw);
// the SASL handlers change it under mu, from the event loop or the
// goroutine that runs a mechanism step. A change is made before the
// answer that tells the client of it is handed to the connection, so the
// client's next frame is read under the new state.
type ConnAuth struct {
	cfg   *SASLConfig
	close func() // closes the connection; any goroutine

	authed  atomic.Bool
	raw     atomic.Bool
	failed  atomic.Bool
	expires atomic.Int64 // unix nanos the session ends at; 0: never

	mu struct {
		sync.Mutex
		phase     saslPhase
		mech      string
		session   sasl.Session
		principal string // once authenticated; reauth must keep it
	}
}

// NewConnAuth makes a connection's state; close must close the connection
// from any goroutine.
func NewConnAuth(cfg *SASLConfig, close func()) *ConnAuth {
	return &ConnAuth{cfg: cfg, close: close}
}

// PreAuth reports that the connection has not authenticated yet: frames
// are bounded by PreAuthMaxFrame.
func (a *ConnAuth) PreAuth() bool { return !a.authed.Load() }

// Raw reports that the next frame is a raw SASL token (SaslHandshake v0's
// framing) rather than a request.
func (a *ConnAuth) Raw() bool { return a.raw.Load() }

// Admits reports whether a request with this key may be served now:
// before authentication (and once a session has expired) only
// ApiVersions, SaslHandshake and SaslAuthenticate are; after a failure
// nothing is. A refused request closes the connection, as Kafka does.
func (a *ConnAuth) Admits(key int16, now time.Time) bool {
	if a.failed.Load() || a.raw.Load() {
		return false
	}
	if key == 17 || key == 18 || key == 36 {
		return true
	}
	if !a.authed.Load() {
		return false
	}
	exp := a.expires.Load()
	return exp == 0 || now.UnixNano() < exp
}

// fail marks the exchange refused and closes the connection after the
// delay, which leaves time for the answer to be written. Call with mu held.
func (a *ConnAuth) fail(ctx context.Context, info *ConnInfo, mech, reason string, err error) {
	a.mu.phase = phaseFailed
	a.refuse(ctx, info, mech, reason, err)
}

// refuse is fail without the phase, for when mu is held by a step in
// flight: the flags alone stop the connection.
func (a *ConnAuth) refuse(ctx context.Context, info *ConnInfo, mech, reason string, err error) {
	// The mechanism is the client's word: a name outside the known ones
	// would make a metric label per attempt.
	switch mech {
	case sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512, sasl.OAuthBearer:
	default:
		mech = "other"
	}
	a.failed.Store(true)
	a.raw.Store(false)
	log := a.cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log.WarnContext(ctx, "SASL authentication failed", "mechanism", mech, "reason", reason, "remote", info.RemoteAddr, "listener", info.listenerName(), "err", err)
	if a.cfg.Observer != nil {
		a.cfg.Observer.AuthFailed(ctx, mech, reason)
	}
	delay := a.cfg.FailureDelay
	if delay <= 0 {
		delay = 250 * time.Millisecond
	}
	time.AfterFunc(delay, a.close)
}

// handshake runs SaslHandshake: it picks the mechanism and starts its
// session. It returns the error code to answer (0: go on).
func (a *ConnAuth) handshake(ctx context.Context, info *ConnInfo, version int16, mech string) int16 {
	// On the event loop, which must not wait on a step in flight (PLAIN
	// salting a password): a handshake during one is out of order anyway.
	if !a.mu.TryLock() {
		a.refuse(ctx, info, mech, "illegal_state", errors.New("SaslHandshake while an authentication step runs"))
		return kerr.IllegalSaslState.Code
	}
	defer a.mu.Unlock()
	switch {
	case a.mu.phase != phaseHandshake:
		a.fail(ctx, info, mech, "illegal_state", fmt.Errorf("SaslHandshake in phase %d", a.mu.phase))
		return kerr.IllegalSaslState.Code
	case a.authed.Load() && version == 0:
		// Re-authentication (KIP-368) starts with v1: after v0 the client
		// would send raw tokens, which an authenticated connection's
		// requests cannot be told apart from.
		return kerr.IllegalSaslState.Code
	case a.authed.Load() && mech != a.mu.mech:
		// As Kafka: re-authentication keeps the mechanism.
		a.fail(ctx, info, mech, "reauth_mechanism_changed", fmt.Errorf("re-authentication with %s, authenticated with %s", mech, a.mu.mech))
		return kerr.IllegalSaslState.Code
	case !a.cfg.Auth.Enabled(mech):
		a.fail(ctx, info, mech, "unsupported_mechanism", nil)
		return kerr.UnsupportedSaslMechanism.Code
	}
	sess, err := a.cfg.Auth.Start(mech)
	if err != nil {
		a.fail(ctx, info, mech, "unsupported_mechanism", err)
		return kerr.UnsupportedSaslMechanism.Code
	}
	a.mu.mech, a.mu.session = mech, sess
	a.mu.phase = phaseAuthenticate
	if version == 0 {
		a.mu.phase = phaseRaw
		a.raw.Store(true)
	}
	return 0
}

// authOutcome is one SaslAuthenticate step's answer.
type authOutcome struct {
	reply    []byte
	code     int16
	msg      string
	lifetime time.Duration // the session's, once authenticated (0: none)
}

// authenticate runs one step of the exchange with the client's message.
// On success it sets info.Principal (the first time; a re-authentication
// must name the same principal). Mechanism steps may be slow (PLAIN
// salts the password): call off the event loop.
func (a *ConnAuth) authenticate(ctx context.Context, info *ConnInfo, msg []byte, now time.Time) authOutcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.phase != phaseAuthenticate && a.mu.phase != phaseRaw {
		a.fail(ctx, info, a.mu.mech, "illegal_state", fmt.Errorf("SaslAuthenticate in phase %d", a.mu.phase))
		return authOutcome{code: kerr.IllegalSaslState.Code, msg: "SaslAuthenticate without a SaslHandshake"}
	}
	reply, done, err := a.mu.session.Step(msg, now)
	if err != nil {
		a.fail(ctx, info, a.mu.mech, sasl.ReasonOf(err), err)
		var f *sasl.Failure
		text := "Authentication failed"
		if errors.As(err, &f) {
			text = f.Msg
		}
		return authOutcome{code: kerr.SaslAuthenticationFailed.Code, msg: text}
	}
	if !done {
		return authOutcome{reply: reply}
	}
	p := a.mu.session.Principal()
	if a.mu.principal != "" && p != a.mu.principal {
		a.fail(ctx, info, a.mu.mech, "reauth_principal_changed", fmt.Errorf("re-authenticated as %s, was %s", p, a.mu.principal))
		return authOutcome{code: kerr.SaslAuthenticationFailed.Code, msg: "Re-authentication must keep the connection's principal"}
	}
	if a.mu.principal == "" {
		// Before the answer: the client's next request reads it.
		info.Principal = p
		if ts, ok := a.mu.session.(interface{ TokenAuthenticated() bool }); ok && ts.TokenAuthenticated() {
			info.TokenAuth = true
		}
		a.mu.principal = p
	}
	var lifetime time.Duration
	a.expires.Store(0)
	if after := a.cfg.ReauthAfter; after > 0 {
		end := now.Add(after)
		if exp := a.mu.session.Expiry(); !exp.IsZero() && exp.Before(end) {
			end = exp
		}
		lifetime = max(end.Sub(now), time.Millisecond)
		a.expires.Store(end.UnixNano())
	}
	a.mu.phase, a.mu.session = phaseHandshake, nil
	a.raw.Store(false)
	a.authed.Store(true)
	return authOutcome{reply: reply, lifetime: lifetime}
}

// NewRawSASLRequest wraps a raw SASL token frame as a request for the
// SaslAuthenticate handler. frame is kept until the request is answered.
func NewRawSASLRequest(frame []byte) *Request {
	r := NewRequest(Header{Key: 36, Version: 0}, &kmsg.SASLAuthenticateRequest{SASLAuthBytes: frame})
	r.rawSASL = true
	return r
}

// respondRaw answers a raw SASL token with a raw length-prefixed token.
func (r *Request) respondRaw(token []byte) {
	if !r.replied.CompareAndSwap(false, true) {
		return
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(token)), uint32(len(token)))
	frame = append(frame, token...)
	if r.trace != nil {
		r.trace.Responded(len(frame))
	}
	r.reply(frame)
}

// ViaSASL reports that the connection authenticated with SASL.
func (c *ConnInfo) ViaSASL() bool {
	return c != nil && ((c.Auth != nil && !c.Auth.PreAuth()) || c.forwardedSASL)
}

// listenerName is the connection's listener name, for logs.
func (c *ConnInfo) listenerName() string {
	if c == nil || c.Listener == nil {
		return ""
	}
	return c.Listener.Name
}

// advertiseListener puts the connection's listener address in place of
// this node's default one in the responses that name brokers (Metadata,
// DescribeCluster, FindCoordinator, DescribeQuorum's voters, whose
// listener takes its name too), so that a client sees the address of
// the listener it connected to, as Kafka answers per listener. It runs as
// the response is encoded, so the handlers stay listener-blind. Other
// nodes get their address on the listener of the same name when
// Listener.Peer knows it (a cluster node learns its peers' listeners from
// their admin endpoints), else the address they registered (their first
// listener's).
func (r *Request) advertiseListener(resp kmsg.Response) {
	if r.Conn == nil || r.Conn.Listener == nil {
		return
	}
	l := r.Conn.Listener
	if dq, ok := resp.(*kmsg.DescribeQuorumResponse); ok && l.Name != "" {
		// The voters are reached on the client's listener.
		for i := range dq.Nodes {
			for j := range dq.Nodes[i].Listeners {
				dq.Nodes[i].Listeners[j].Name = l.Name
			}
		}
	}
	a := l.Advertised
	if a.Host == "" || a.Port <= 0 {
		return
	}
	addr := func(id int32) (BrokerAddr, bool) {
		if id == a.ID {
			return a, true
		}
		if l.Peer == nil {
			return BrokerAddr{}, false
		}
		p, ok := l.Peer(id)
		return p, ok && p.Host != "" && p.Port > 0
	}
	// move points node id's address at its address on this listener.
	move := func(id int32, host *string, port *int32) {
		if to, ok := addr(id); ok {
			*host, *port = to.Host, to.Port
		}
	}
	switch resp := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range resp.Brokers {
			b := &resp.Brokers[i]
			move(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range resp.Brokers {
			b := &resp.Brokers[i]
			move(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.ProduceResponse:
		for i := range resp.Brokers {
			b := &resp.Brokers[i]
			move(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.FetchResponse:
		for i := range resp.Brokers {
			b := &resp.Brokers[i]
			move(b.NodeID, &b.Host, &b.Port)
		}
	case *kmsg.DescribeQuorumResponse:
		for i := range resp.Nodes {
			n := &resp.Nodes[i]
			if to, ok := addr(n.NodeID); ok && to.Port <= math.MaxUint16 {
				for j := range n.Listeners {
					n.Listeners[j].Host, n.Listeners[j].Port = to.Host, uint16(to.Port)
				}
			}
		}
	case *kmsg.FindCoordinatorResponse:
		if resp.ErrorCode == 0 {
			move(resp.NodeID, &resp.Host, &resp.Port)
		}
		for i := range resp.Coordinators {
			if c := &resp.Coordinators[i]; c.ErrorCode == 0 {
				move(c.NodeID, &c.Host, &c.Port)
			}
		}
	}
}
