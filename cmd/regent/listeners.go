package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/regent-broker/regent/actors/users"
	"github.com/regent-broker/regent/netio"
	"github.com/regent-broker/regent/protocol"
	"github.com/regent-broker/regent/protocol/sasl"
	"github.com/regent-broker/regent/telemetry"
)

// listenerSpec is one --listeners entry: NAME://host:port, where NAME is
// the security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), as in
// Kafka's listeners without a listener.security.protocol.map.
type listenerSpec struct {
	Name     string
	Security protocol.SecurityProtocol
	Addr     string // host:port to bind
}

// parseListeners reads a --listeners (or --advertised-listeners) value:
// comma-separated NAME://host:port, each name at most once.
func parseListeners(s string) ([]listenerSpec, error) {
	var out []listenerSpec
	seen := map[string]bool{}
	for _, ent := range strings.Split(s, ",") {
		ent = strings.TrimSpace(ent)
		if ent == "" {
			continue
		}
		name, addr, ok := strings.Cut(ent, "://")
		if !ok {
			return nil, fmt.Errorf("listener %q: want NAME://host:port, e.g. SASL_PLAINTEXT://127.0.0.1:9094", ent)
		}
		name = strings.ToUpper(name)
		sp := protocol.SecurityProtocol(name)
		switch sp {
		case protocol.Plaintext, protocol.SSL, protocol.SASLPlaintext, protocol.SASLSSL:
		default:
			return nil, fmt.Errorf("listener %q: unknown security protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", ent, name)
		}
		if _, _, err := splitHostPort(addr); err != nil {
			return nil, fmt.Errorf("listener %q: %w", ent, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("listener %s named twice", name)
		}
		seen[name] = true
		out = append(out, listenerSpec{Name: name, Security: sp, Addr: addr})
	}
	if len(out) == 0 {
		return nil, errors.New("no listener: want NAME://host:port[,NAME://host:port]")
	}
	return out, nil
}

// listeners is the node's listeners: --listeners, or one PLAINTEXT on
// --listen. Each is advertised at its --advertised-listeners entry of the
// same name, else (for the --listen shorthand) at --advertise, else at
// its own address.
func (c Config) listeners() ([]listenerSpec, map[string]string, error) {
	var ls []listenerSpec
	if c.Listeners != "" {
		var err error
		if ls, err = parseListeners(c.Listeners); err != nil {
			return nil, nil, fmt.Errorf("--listeners: %w", err)
		}
	} else {
		ls = []listenerSpec{{Name: string(protocol.Plaintext), Security: protocol.Plaintext, Addr: c.Listen}}
	}
	adv := map[string]string{}
	for _, l := range ls {
		adv[l.Name] = l.Addr
	}
	if c.Listeners == "" && c.Advertise != "" {
		adv[ls[0].Name] = c.Advertise
	}
	if c.AdvertisedListeners != "" {
		as, err := parseListeners(c.AdvertisedListeners)
		if err != nil {
			return nil, nil, fmt.Errorf("--advertised-listeners: %w", err)
		}
		for _, a := range as {
			if _, ok := adv[a.Name]; !ok {
				return nil, nil, fmt.Errorf("--advertised-listeners names %s, which is not a listener", a.Name)
			}
			adv[a.Name] = a.Addr
		}
	}
	return ls, adv, nil
}

// primaryListener is the listener whose address is the node's address in
// the cluster (raft peers, --peers): the first one.
func primaryListener(ls []listenerSpec) listenerSpec { return ls[0] }

// saslEnabled reports whether any listener authenticates with SASL.
func saslEnabled(ls []listenerSpec) bool {
	for _, l := range ls {
		if l.Security.SASL() {
			return true
		}
	}
	return false
}

// saslMechanisms reads --sasl-mechanisms.
func parseMechanisms(s string) []string {
	var out []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// checkMechanisms checks a --sasl-mechanisms value.
func checkMechanisms(s string) error {
	ms := parseMechanisms(s)
	if len(ms) == 0 {
		return errors.New("want at least one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER")
	}
	for _, m := range ms {
		switch m {
		case sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512, sasl.OAuthBearer:
		default:
			return fmt.Errorf("unknown mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", m)
		}
	}
	return nil
}

// validateSecurity checks the listeners and SASL flags together.
func (c Config) validateSecurity() error {
	ls, _, err := c.listeners()
	if err != nil {
		return err
	}
	if err := checkMechanisms(c.SASLMechanisms); err != nil {
		return fmt.Errorf("--sasl-mechanisms: %w", err)
	}
	oauth := saslEnabled(ls) && slices.Contains(parseMechanisms(c.SASLMechanisms), sasl.OAuthBearer)
	switch {
	case c.SASLOAuthUnsecured && c.SASLOAuthJWKS != "":
		return errors.New("--sasl-oauthbearer-unsecured and --sasl-oauthbearer-jwks exclude each other: tokens are either verified against the JWKS or not verified")
	case c.SASLOAuthUnsecured && !oauth:
		return errors.New("--sasl-oauthbearer-unsecured needs OAUTHBEARER in --sasl-mechanisms and a SASL_* listener")
	case oauth && !c.SASLOAuthUnsecured && c.SASLOAuthJWKS == "":
		return errors.New("--sasl-mechanisms has OAUTHBEARER: --sasl-oauthbearer-jwks is needed to check tokens (or --sasl-oauthbearer-unsecured, for tests only)")
	}
	if c.ReauthAfter < 0 {
		return errors.New("--connections-max-reauth-ms: want 0 or more")
	}
	return c.validateTLS(ls)
}

// reauthValue is a number of milliseconds, 0 (off) or more.
type reauthValue struct{ p *time.Duration }

func (v reauthValue) kind() string { return "ms" }

func (v reauthValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.FormatInt(v.p.Milliseconds(), 10)
}

func (v reauthValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > int64(1<<63-1)/int64(time.Millisecond) {
		return errors.New("want a number of milliseconds, 0 (off) or more")
	}
	*v.p = time.Duration(n) * time.Millisecond
	return nil
}

// buildListeners makes the protocol side of each listener: its advertised
// address and, on SASL listeners, the mechanisms over the credential store.
// With OAUTHBEARER, the JWKS is read again at every SIGHUP until ctx ends.
func buildListeners(ctx context.Context, cfg Config, specs []listenerSpec, advertised map[string]string, store *users.Store, tel *telemetry.Telemetry, logger *slog.Logger) ([]*protocol.Listener, error) {
	var saslCfg *protocol.SASLConfig
	if saslEnabled(specs) {
		mechs := parseMechanisms(cfg.SASLMechanisms)
		var oauth *sasl.OAuthValidator
		if slices.Contains(mechs, sasl.OAuthBearer) {
			var err error
			oauth, err = sasl.NewOAuthValidator(oauthConfig(cfg))
			if err != nil {
				return nil, fmt.Errorf("OAUTHBEARER: %w", err)
			}
			if oauth.Unsecured() {
				logger.Warn("INSECURE: --sasl-oauthbearer-unsecured: OAUTHBEARER tokens are NOT verified, any client can authenticate as any principal; for tests and development only")
			} else {
				reloadJWKSOnSIGHUP(ctx, logger, oauth)
			}
		}
		auth, err := sasl.New(sasl.Config{Mechanisms: mechs, Credentials: store, OAuth: oauth})
		if err != nil {
			return nil, fmt.Errorf("--sasl-mechanisms: %w", err)
		}
		saslCfg = &protocol.SASLConfig{Auth: auth, ReauthAfter: cfg.ReauthAfter, Observer: tel.AuthObserver(), Logger: logger}
		logger.Info("SASL enabled", "mechanisms", mechs, "reauth_ms", cfg.ReauthAfter.Milliseconds())
	}
	var out []*protocol.Listener
	for _, l := range specs {
		pl := &protocol.Listener{Name: l.Name, Security: l.Security}
		pl.Advertised = protocol.ParseBrokerAddr(cfg.NodeID, advertised[l.Name])
		if l.Security.SASL() {
			pl.SASL = saslCfg
		}
		out = append(out, pl)
	}
	return out, nil
}

// oauthConfig is the OAUTHBEARER validator's configuration from the flags.
func oauthConfig(cfg Config) sasl.OAuthConfig {
	var scopes []string
	for _, sc := range strings.Split(cfg.SASLOAuthRequiredScope, ",") {
		if sc = strings.TrimSpace(sc); sc != "" {
			scopes = append(scopes, sc)
		}
	}
	return sasl.OAuthConfig{
		JWKSFile:       cfg.SASLOAuthJWKS,
		Unsecured:      cfg.SASLOAuthUnsecured,
		Issuer:         cfg.SASLOAuthIssuer,
		Audience:       cfg.SASLOAuthAudience,
		PrincipalClaim: cfg.SASLOAuthSubClaim,
		ScopeClaim:     cfg.SASLOAuthScopeClaim,
		RequiredScope:  scopes,
	}
}

// reloadJWKSOnSIGHUP reads the JWKS again at every SIGHUP (key rotation)
// until ctx ends; a file that does not load is logged and the keys in use
// are kept.
func reloadJWKSOnSIGHUP(ctx context.Context, logger *slog.Logger, v *sasl.OAuthValidator) {
	onSIGHUP(ctx, func() {
		if err := v.Reload(); err != nil {
			logger.Error("SIGHUP: JWKS not reloaded, the keys in use are kept", "err", err)
			return
		}
		logger.Info("SIGHUP: JWKS reloaded")
	})
}

// eventLoopsPerListener is each gnet (plaintext or SASL_PLAINTEXT)
// listener's event loop count: the flag's when set, else the node's
// default divided among those listeners (each at least one), so that all
// of them together leave Ps free for the work the loops wake.
func eventLoopsPerListener(flag int, listeners []*protocol.Listener) int {
	if flag > 0 {
		return flag
	}
	plain := 0
	for _, l := range listeners {
		if !tlsListener(l.Security) {
			plain++
		}
	}
	return max(1, netio.DefaultEventLoops()/max(1, plain))
}
