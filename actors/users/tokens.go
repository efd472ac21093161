package users

// Delegation tokens (KIP-48), kept beside the SCRAM credentials because a
// token is one: a client authenticates with SCRAM and the extension
// tokenauth=true, the token id as user name and the token's HMAC (base64)
// as password, and becomes the token's owner. The proposer makes the
// token (id, HMAC from the broker's secret key, SCRAM credentials of the
// HMAC with a fresh salt) and every change carries the proposer's clock,
// so every node applies the same bytes and reaches the same state.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/replication"
)

// TokensFileName is the token file under the state directory's meta/.
const TokensFileName = "delegation-tokens.json"

// Bounds on stored tokens: any SASL user may create tokens, and every
// change rewrites the token file, so their number is bounded (Kafka's is
// not). A create past either is POLICY_VIOLATION.
const (
	MaxTokens         = 10_000
	MaxTokensPerOwner = 1_000
)

// tokenIterations is the SCRAM iteration count of a token's credentials
// (Kafka's DelegationTokenManager uses its minimum).
const tokenIterations = MinIterations

// Token is one delegation token. Times are Unix milliseconds.
type Token struct {
	ID   string `json:"id"`
	HMAC []byte `json:"hmac"`
	// Owner is the principal the token authenticates as; Requester who
	// created it (differs when created for another user, v3).
	Owner     string   `json:"owner"`
	Requester string   `json:"requester"`
	Renewers  []string `json:"renewers,omitempty"`
	Issued    int64    `json:"issued"`
	Expiry    int64    `json:"expiry"`
	Max       int64    `json:"max"`
	// Creds are SCRAM credentials whose password is the HMAC in base64.
	Creds []Credential `json:"creds"`
}

// Password is what a client uses as its SCRAM password: the HMAC in
// standard base64, as Kafka's DelegationToken.hmacAsBase64String.
func (t *Token) Password() string { return base64.StdEncoding.EncodeToString(t.HMAC) }

// MayChange reports whether principal may renew, expire or see t: its
// owner, requester or one of its renewers.
func (t *Token) MayChange(principal string) bool {
	return principal == t.Owner || principal == t.Requester || slices.Contains(t.Renewers, principal)
}

// NewToken makes a token for owner, created by requester, issued at now
// (ms) and living until max (ms), expiring first at expiry (ms): a random
// id, its HMAC-SHA512 under secret, and SCRAM credentials of the HMAC.
func NewToken(secret []byte, owner, requester string, renewers []string, now, expiry, max int64) (*Token, error) {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("token id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw)
	mac := hmac.New(sha512.New, secret)
	mac.Write([]byte(id))
	t := &Token{ID: id, HMAC: mac.Sum(nil), Owner: owner, Requester: requester, Renewers: renewers, Issued: now, Expiry: expiry, Max: max}
	for _, m := range []Mechanism{ScramSHA256, ScramSHA512} {
		salt := make([]byte, 32)
		if _, err := rand.Read(salt); err != nil {
			return nil, fmt.Errorf("token salt: %w", err)
		}
		salted, err := SaltPassword(m, t.Password(), salt, tokenIterations)
		if err != nil {
			return nil, fmt.Errorf("token credential: %w", err)
		}
		t.Creds = append(t.Creds, FromSaltedPassword(m, salted, salt, tokenIterations))
	}
	return t, nil
}

// tokens maps a token id to its token; published copies are never mutated.
type tokens map[string]*Token

// kindToken names the token command kind; renaming it breaks replaying logs.
const kindToken = "users.token"

// Token operations.
const (
	opCreate = "create"
	opRenew  = "renew"
	opExpire = "expire"
	opPurge  = "purge"
)

// tokenCmd is one change to the tokens, with the proposer's clock (Now,
// ms) so that every node decides expiry the same way.
type tokenCmd struct {
	Op        string `json:"op"`
	Token     *Token `json:"token,omitempty"`     // create
	HMAC      []byte `json:"hmac,omitempty"`      // renew, expire
	Principal string `json:"principal,omitempty"` // renew, expire: who asks
	Period    int64  `json:"period,omitempty"`    // renew, expire: ms from Now
	Now       int64  `json:"now"`
}

func (*tokenCmd) CommandKind() string { return kindToken }

func (c *tokenCmd) AppendCommand(b []byte) []byte { return appendJSON(b, c) }

func init() { registerJSON[tokenCmd](kindToken) }

// TokenResult is a token change's outcome: the token's expiry after it
// (ms), or the Kafka error that refused it.
type TokenResult struct {
	Expiry int64
	Err    error
}

// LocalFailure implements replication.LocalFailer.
func (r TokenResult) LocalFailure() error { return replication.FailedLocally(r.Err) }

// CreateToken stores t. Blocks until applied: call it off the event loop.
func (s *Store) CreateToken(t *Token) error {
	_, err := s.proposeToken(&tokenCmd{Op: opCreate, Token: t, Now: t.Issued})
	return err
}

// RenewToken sets the expiry of the token with hmac to now+period (ms;
// negative: defaultPeriod), bounded by its max, for principal (owner or
// renewer). It returns the new expiry.
func (s *Store) RenewToken(hmac []byte, principal string, period, defaultPeriod, now int64) (int64, error) {
	if period < 0 {
		period = defaultPeriod
	}
	return s.proposeToken(&tokenCmd{Op: opRenew, HMAC: hmac, Principal: principal, Period: period, Now: now})
}

// ExpireToken sets the expiry of the token with hmac to now+period (ms),
// bounded by its max; a negative period removes the token now. It returns
// the new expiry.
func (s *Store) ExpireToken(hmac []byte, principal string, period, now int64) (int64, error) {
	return s.proposeToken(&tokenCmd{Op: opExpire, HMAC: hmac, Principal: principal, Period: period, Now: now})
}

// PurgeTokens removes the tokens expired at now (ms) and returns how many.
func (s *Store) PurgeTokens(now int64) (int, error) {
	n, err := s.proposeToken(&tokenCmd{Op: opPurge, Now: now})
	return int(n), err
}

func (s *Store) proposeToken(c *tokenCmd) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := replication.ProposeWait[TokenResult](ctx, s.repl, replKey, c)
	if err != nil {
		return 0, proposeError(err, "delegation token change")
	}
	return res.Expiry, res.Err
}

// LookupToken returns the token id's SCRAM credential for m, its owner
// and its expiry (ms), if the token exists and has not expired at now (ms).
func (s *Store) LookupToken(id string, m Mechanism, now int64) (owner string, cred Credential, expiry int64, ok bool) {
	t := (*s.tokens.Load())[id]
	if t == nil || t.Expiry < now {
		return "", Credential{}, 0, false
	}
	for _, c := range t.Creds {
		if c.Mechanism == m {
			return t.Owner, c, t.Expiry, true
		}
	}
	return "", Credential{}, 0, false
}

// Tokens lists every stored token (expired ones until purged), by issue
// time then id. The tokens must not be modified.
func (s *Store) Tokens() []*Token {
	ts := *s.tokens.Load()
	out := make([]*Token, 0, len(ts))
	for _, t := range ts {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Issued != out[j].Issued {
			return out[i].Issued < out[j].Issued
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// applyToken applies a token command on every node, in commit order.
// Caller holds s.mu.
func (s *Store) applyToken(c *tokenCmd) TokenResult {
	old := *s.tokens.Load()
	next := make(tokens, len(old)+1)
	for id, t := range old {
		next[id] = t
	}
	var res TokenResult
	switch c.Op {
	case opCreate:
		t := c.Token
		if t == nil || t.ID == "" || len(t.HMAC) == 0 || len(t.Creds) == 0 {
			return TokenResult{Err: fmt.Errorf("%w: malformed token", kerr.InvalidRequest)}
		}
		if next[t.ID] != nil {
			return TokenResult{Err: fmt.Errorf("%w: token id %s exists", kerr.DuplicateResource, t.ID)}
		}
		if err := checkTokenBounds(old, t.Owner); err != nil {
			return TokenResult{Err: err}
		}
		next[t.ID] = t
		res.Expiry = t.Expiry
	case opRenew, opExpire:
		var t *Token
		for _, cand := range old {
			if hmac.Equal(cand.HMAC, c.HMAC) {
				t = cand
				break
			}
		}
		switch {
		case t == nil:
			return TokenResult{Err: fmt.Errorf("%w: no delegation token has this HMAC", kerr.DelegationTokenNotFound)}
		case !t.MayChange(c.Principal):
			return TokenResult{Err: fmt.Errorf("%w: %s is neither the token's owner nor one of its renewers", kerr.DelegationTokenOwnerMismatch, c.Principal)}
		case t.Max < c.Now || t.Expiry < c.Now:
			return TokenResult{Err: fmt.Errorf("%w: delegation token %s expired", kerr.DelegationTokenExpired, t.ID)}
		}
		if c.Op == opExpire && c.Period < 0 {
			delete(next, t.ID)
			res.Expiry = c.Now
			break
		}
		nt := *t
		nt.Expiry = min(t.Max, c.Now+c.Period)
		next[t.ID] = &nt
		res.Expiry = nt.Expiry
	case opPurge:
		for id, t := range old {
			if t.Expiry < c.Now {
				delete(next, id)
				res.Expiry++
			}
		}
		if res.Expiry == 0 {
			return res
		}
	default:
		return TokenResult{Err: fmt.Errorf("%w: unknown token operation %q", kerr.InvalidRequest, c.Op)}
	}
	if err := saveTokens(s.tokensPath(), next); err != nil {
		s.log.Error("persist delegation tokens", "err", err)
		return TokenResult{Err: replication.MarkLocal(fmt.Errorf("%w: persist delegation tokens: %v", kerr.KafkaStorageError, err))}
	}
	s.tokens.Store(&next)
	return res
}

// checkTokenBounds refuses a new token for owner when ts holds MaxTokens
// tokens, or MaxTokensPerOwner of owner's.
func checkTokenBounds(ts tokens, owner string) error {
	if len(ts) >= MaxTokens {
		return fmt.Errorf("%w: the cluster holds %d delegation tokens, the most it keeps; expire some first", kerr.PolicyViolation, len(ts))
	}
	n := 0
	for _, t := range ts {
		if t.Owner == owner {
			n++
		}
	}
	if n >= MaxTokensPerOwner {
		return fmt.Errorf("%w: %s owns %d delegation tokens, the most one owner may; expire some first", kerr.PolicyViolation, owner, n)
	}
	return nil
}

func (s *Store) tokensPath() string { return filepath.Join(filepath.Dir(s.path), TokensFileName) }

func loadTokens(path string) (tokens, error) {
	ts := tokens{}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ts, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read delegation tokens: %w", err)
	}
	var list []*Token
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	for _, t := range list {
		ts[t.ID] = t
	}
	return ts, nil
}

func saveTokens(path string, ts tokens) error {
	list := make([]*Token, 0, len(ts))
	for _, t := range ts {
		list = append(list, t)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	// The HMACs are the tokens' passwords.
	return writePrivateJSON(path, list)
}
