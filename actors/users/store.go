// Package users holds the SCRAM credential store: for each user and SCRAM
// mechanism, the salt, the iteration count, StoredKey and ServerKey (RFC
// 5802), never the password; and the delegation tokens (tokens.go).
// Changes are commands proposed to the replicator and applied on every
// node, like the topic registry's, so the store is the same on every node
// and survives restarts (and, in cluster mode, is rebuilt from the raft
// log and its snapshots, which capture the state directory's
// meta/scram-credentials.json and meta/delegation-tokens.json).
package users

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/regent-broker/regent/actors/internal/replstore"
	"github.com/regent-broker/regent/actors/replication"
	"github.com/regent-broker/regent/storage/atomicfile"
)

// Mechanism is a SCRAM mechanism, numbered as Kafka's
// AlterUserScramCredentials and DescribeUserScramCredentials number them.
type Mechanism int8

// The SCRAM mechanisms Kafka knows.
const (
	ScramSHA256 Mechanism = 1
	ScramSHA512 Mechanism = 2
)

// Kafka's bounds on a SCRAM credential's iteration count
// (ScramMechanism.minIterations; the upper bound is the broker's).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// ParseMechanism reads a SASL mechanism name.
func ParseMechanism(name string) (Mechanism, bool) {
	switch name {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return 0, false
}

// String is the SASL mechanism name.
func (m Mechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("SCRAM(%d)", int8(m))
}

// Valid reports whether m is a known mechanism.
func (m Mechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

// Hash is the mechanism's hash function.
func (m Mechanism) Hash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is what is stored of one user's password for one mechanism.
type Credential struct {
	Mechanism  Mechanism `json:"mechanism"`
	Salt       []byte    `json:"salt"`
	Iterations int32     `json:"iterations"`
	StoredKey  []byte    `json:"stored_key"`
	ServerKey  []byte    `json:"server_key"`
}

// FromSaltedPassword derives the stored keys from a salted password
// (Hi(password, salt, i) in RFC 5802), which is what clients send in
// AlterUserScramCredentials upsertions.
func FromSaltedPassword(m Mechanism, salted, salt []byte, iterations int32) Credential {
	h := m.Hash()
	ck := hmacOf(h, salted, "Client Key")
	sum := h()
	sum.Write(ck)
	return Credential{
		Mechanism: m, Salt: append([]byte(nil), salt...), Iterations: iterations,
		StoredKey: sum.Sum(nil), ServerKey: hmacOf(h, salted, "Server Key"),
	}
}

// SaltPassword is Hi(password, salt, iterations) of RFC 5802.
func SaltPassword(m Mechanism, password string, salt []byte, iterations int32) ([]byte, error) {
	return pbkdf2.Key(m.Hash(), password, salt, int(iterations), m.Hash()().Size())
}

// Verify reports whether password matches c (PLAIN checks passwords this
// way: the password is salted with c's salt and its StoredKey compared in
// constant time). It costs c.Iterations hash rounds: not for event loops.
func (c Credential) Verify(password string) bool {
	salted, err := SaltPassword(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return hmac.Equal(FromSaltedPassword(c.Mechanism, salted, c.Salt, c.Iterations).StoredKey, c.StoredKey)
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Upsert sets a user's credential for one mechanism.
type Upsert struct {
	User string `json:"user"`
	Credential
}

// Deletion removes a user's credential for one mechanism.
type Deletion struct {
	User      string    `json:"user"`
	Mechanism Mechanism `json:"mechanism"`
}

// replKey is the replicator key the store applies.
const replKey = "users"

// kindAlter names the one command kind; renaming it breaks replaying logs.
const kindAlter = "users.alter"

// alterCmd carries whole credentials (derived by the proposer), so every
// node applies the same bytes.
type alterCmd struct {
	Upserts   []Upsert   `json:"upserts"`
	Deletions []Deletion `json:"deletions"`
}

func (*alterCmd) CommandKind() string { return kindAlter }

func (c *alterCmd) AppendCommand(b []byte) []byte { return appendJSON(b, c) }

func init() { registerJSON[alterCmd](kindAlter) }

// appendJSON appends c's JSON: the store's commands are plain structs of
// strings, ints and byte slices, which always marshal.
func appendJSON(b []byte, c replication.Encodable) []byte {
	raw, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("users: encode %s: %v", c.CommandKind(), err))
	}
	return append(b, raw...)
}

// registerJSON registers the decoder of a command kind encoded by
// appendJSON.
func registerJSON[T any, PT interface {
	*T
	replication.Encodable
}](kind string) {
	replication.RegisterDecoder(kind, func(payload []byte) (replication.Command, error) {
		c := PT(new(T))
		if err := json.Unmarshal(payload, c); err != nil {
			return nil, err
		}
		return c, nil
	})
}

// proposeError maps a proposal's failure to Kafka's error: NOT_CONTROLLER
// on a follower, REQUEST_TIMED_OUT when the outcome is unknown.
func proposeError(err error, what string) error {
	switch {
	case errors.Is(err, replication.ErrNotLeader):
		return fmt.Errorf("%w: this broker is not the cluster leader (the controller): %v", kerr.NotController, err)
	case errors.Is(err, replication.ErrOutcomeUnknown):
		return fmt.Errorf("%w: %s may or may not be applied: %v", kerr.RequestTimedOut, what, err)
	}
	return err
}

// FileName is the store's file under the data (state) directory's meta/.
const FileName = "scram-credentials.json"

// users maps a user name to its credentials by mechanism; published
// copies are never mutated.
type users map[string]map[Mechanism]Credential

// Store holds the SCRAM credentials.
type Store struct {
	path string
	repl replication.Replicator
	log  *slog.Logger

	// current is read lock-free by authentications; replaced under mu.
	current atomic.Pointer[users]
	// tokens, likewise: the delegation tokens by id.
	tokens atomic.Pointer[tokens]

	// mu serializes Apply (on the proposer's goroutine with replication.Local,
	// on the raft FSM goroutine otherwise). Never held across Propose.
	mu struct {
		sync.Mutex
		// reg is the registration with repl and the closed flag.
		reg replstore.Registration
	}
}

// Options configures the store.
type Options struct {
	// DataDir is the state directory (the topic registry's); the store
	// lives in its meta/ folder.
	DataDir string
	// Repl orders changes; nil: a Local one.
	Repl   replication.Replicator
	Logger *slog.Logger
}

// Open loads the stored credentials and registers the store with the
// replicator.
func Open(o Options) (*Store, error) {
	s := &Store{path: filepath.Join(o.DataDir, "meta", FileName), repl: o.Repl, log: o.Logger}
	if s.repl == nil {
		s.repl = replication.NewLocal()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	u, err := load(s.path)
	if err != nil {
		return nil, err
	}
	ts, err := loadTokens(s.tokensPath())
	if err != nil {
		return nil, err
	}
	s.current.Store(&u)
	s.tokens.Store(&ts)
	s.mu.reg = replstore.Register(s.repl, replKey, "users", s)
	return s, nil
}

// persisted is the file's shape: users and their credentials, sorted.
type persisted struct {
	User        string       `json:"user"`
	Credentials []Credential `json:"credentials"`
}

func load(path string) (users, error) {
	u := users{}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read SCRAM credentials: %w", err)
	}
	var ps []persisted
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	for _, p := range ps {
		m := map[Mechanism]Credential{}
		for _, c := range p.Credentials {
			m[c.Mechanism] = c
		}
		u[p.User] = m
	}
	return u, nil
}

func save(path string, u users) error {
	ps := make([]persisted, 0, len(u))
	for name, m := range u {
		p := persisted{User: name}
		for _, c := range m {
			p.Credentials = append(p.Credentials, c)
		}
		sort.Slice(p.Credentials, func(i, j int) bool { return p.Credentials[i].Mechanism < p.Credentials[j].Mechanism })
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].User < ps[j].User })
	// Not secrets in the password sense, but StoredKey and salt allow
	// an offline dictionary attack.
	return writePrivateJSON(path, ps)
}

// writePrivateJSON replaces path with v's JSON, readable by the broker's
// user only.
func writePrivateJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(path, raw); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// Lookup returns user's credential for m.
func (s *Store) Lookup(user string, m Mechanism) (Credential, bool) {
	c, ok := (*s.current.Load())[user][m]
	return c, ok
}

// UserCredentials is one user's mechanisms and iteration counts, as
// DescribeUserScramCredentials reports them.
type UserCredentials struct {
	User  string
	Infos []Credential
}

// Describe lists the credentials of the named users (all users when names
// is empty), sorted; unknown names are left out.
func (s *Store) Describe(names []string) []UserCredentials {
	u := *s.current.Load()
	if len(names) == 0 {
		for n := range u {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	var out []UserCredentials
	for _, n := range names {
		m, ok := u[n]
		if !ok {
			continue
		}
		uc := UserCredentials{User: n}
		for _, c := range m {
			uc.Infos = append(uc.Infos, c)
		}
		sort.Slice(uc.Infos, func(i, j int) bool { return uc.Infos[i].Mechanism < uc.Infos[j].Mechanism })
		out = append(out, uc)
	}
	return out
}

// proposeTimeout bounds the wait for a change to commit.
const proposeTimeout = 30 * time.Second

// Alter applies upserts and deletions as one command and returns, for each
// upsert then each deletion in order, nil or its Kafka error. An error
// for all of them (the returned error) means the command was not known to
// commit: NOT_CONTROLLER on a follower, REQUEST_TIMED_OUT when the outcome
// is unknown. Blocks until applied: call it off the event loop.
func (s *Store) Alter(ups []Upsert, dels []Deletion) ([]error, error) {
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	res, err := replication.ProposeWait[[]error](ctx, s.repl, replKey, &alterCmd{Upserts: ups, Deletions: dels})
	if err != nil {
		return nil, proposeError(err, "SCRAM change")
	}
	return res, nil
}

// Apply implements replication.Applier. It runs on every node in commit order
// and depends only on the command and the stored state: each operation is
// checked again (a deletion of a credential that is not there fails with
// RESOURCE_NOT_FOUND) and the rest applied. It returns []error, one per
// upsert then deletion, or an error when nothing could be applied; for a
// token command, a TokenResult.
func (s *Store) Apply(cmd replication.Command) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.reg.Closed() {
		return fmt.Errorf("%w: SCRAM credential store is closed", kerr.KafkaStorageError)
	}
	if tc, ok := cmd.(*tokenCmd); ok {
		return s.applyToken(tc)
	}
	c, ok := cmd.(*alterCmd)
	if !ok {
		return fmt.Errorf("users: unexpected command %T", cmd)
	}
	old := *s.current.Load()
	next := make(users, len(old)+len(c.Upserts))
	for n, m := range old {
		next[n] = m
	}
	// copyOf gives a user's map that this command may change.
	copied := map[string]bool{}
	copyOf := func(user string) map[Mechanism]Credential {
		if !copied[user] {
			m := make(map[Mechanism]Credential, len(next[user])+1)
			for k, v := range next[user] {
				m[k] = v
			}
			next[user] = m
			copied[user] = true
		}
		return next[user]
	}
	results := make([]error, 0, len(c.Upserts)+len(c.Deletions))
	for _, u := range c.Upserts {
		if err := checkUpsert(u); err != nil {
			results = append(results, err)
			continue
		}
		copyOf(u.User)[u.Mechanism] = u.Credential
		results = append(results, nil)
	}
	for _, d := range c.Deletions {
		if _, ok := next[d.User][d.Mechanism]; !ok {
			results = append(results, fmt.Errorf("%w: user %q has no %s credential", kerr.ResourceNotFound, d.User, d.Mechanism))
			continue
		}
		m := copyOf(d.User)
		delete(m, d.Mechanism)
		if len(m) == 0 {
			delete(next, d.User)
		}
		results = append(results, nil)
	}
	if err := save(s.path, next); err != nil {
		s.log.Error("persist SCRAM credentials", "err", err)
		return replication.MarkLocal(fmt.Errorf("%w: persist SCRAM credentials: %v", kerr.KafkaStorageError, err))
	}
	s.current.Store(&next)
	return results
}

// checkUpsert refuses what Kafka refuses of an upsertion.
func checkUpsert(u Upsert) error {
	switch {
	case u.User == "":
		return fmt.Errorf("%w: empty user name", kerr.UnacceptableCredential)
	case !u.Mechanism.Valid():
		return fmt.Errorf("%w: unknown SCRAM mechanism %d", kerr.UnsupportedSaslMechanism, u.Mechanism)
	case u.Iterations < MinIterations:
		return fmt.Errorf("%w: iterations %d below the minimum %d", kerr.UnacceptableCredential, u.Iterations, MinIterations)
	case u.Iterations > MaxIterations:
		return fmt.Errorf("%w: iterations %d above the maximum %d", kerr.UnacceptableCredential, u.Iterations, MaxIterations)
	case len(u.Salt) == 0 || len(u.StoredKey) == 0 || len(u.ServerKey) == 0:
		return fmt.Errorf("%w: empty salt or salted password", kerr.UnacceptableCredential)
	}
	return nil
}

// Close stops applying changes.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.reg.Close()
	return nil
}

// Reopen reloads a closed store's credentials from its file and registers
// it with the replicator again. A raft node calls it after Close and a
// snapshot restore rewrote the state directory, so that the listeners
// holding this *Store authenticate against the restored credentials. It
// must run where nothing is applied (the raft FSM goroutine, inside the
// restore); until it returns, authentications use the credentials from
// before. On error the store stays closed.
func (s *Store) Reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.reg.Reopen(s, func() error {
		u, err := load(s.path)
		if err != nil {
			return fmt.Errorf("reopen SCRAM credentials: %w", err)
		}
		ts, err := loadTokens(s.tokensPath())
		if err != nil {
			return fmt.Errorf("reopen delegation tokens: %w", err)
		}
		s.current.Store(&u)
		s.tokens.Store(&ts)
		return nil
	})
}

// AddOffline sets user's credential for m from password directly in the
// store file under dataDir, for a broker that is stopped (the caller holds
// the data directory's lock): the way to create a first admin before any
// client can authenticate. Single-node data directories only: a cluster
// node's state directory is rebuilt from the raft log at every start, so a
// credential written there would not survive nor reach the other nodes.
func AddOffline(dataDir, user string, m Mechanism, password string, iterations int32) error {
	if _, err := os.Stat(filepath.Join(dataDir, "raft")); err == nil {
		return fmt.Errorf("%s is a cluster node's data directory: its state is rebuilt from raft at start, so users are added through a running cluster (kafka-configs --alter --entity-type users, or AlterUserScramCredentials) on a listener that needs no SASL", dataDir)
	}
	if user == "" {
		return errors.New("empty user name")
	}
	if !m.Valid() {
		return fmt.Errorf("unknown mechanism %d", m)
	}
	if iterations == 0 {
		iterations = MinIterations
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return fmt.Errorf("salt: %w", err)
	}
	salted, err := SaltPassword(m, password, salt, iterations)
	if err != nil {
		return fmt.Errorf("salt password: %w", err)
	}
	up := Upsert{User: user, Credential: FromSaltedPassword(m, salted, salt, iterations)}
	if err := checkUpsert(up); err != nil {
		return err
	}
	path := filepath.Join(dataDir, "meta", FileName)
	u, err := load(path)
	if err != nil {
		return err
	}
	if u[user] == nil {
		u[user] = map[Mechanism]Credential{}
	}
	u[user][m] = up.Credential
	if err := save(path, u); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
