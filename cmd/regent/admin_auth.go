package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Admin requests that change something (membership, forwards carrying a
// client's principal) are signed with the cluster secret when one is
// configured (--cluster-secret-file): over plaintext links it is what
// tells a node from anyone else who reaches the admin port, as Kafka's
// inter-broker listeners never trust a principal an unauthenticated peer
// claims. Read-only GETs (status, listeners) are not signed.
//
// A signature is HMAC-SHA256, keyed by the secret, over
//
//	regent-admin-v1 \n METHOD \n REQUEST-URI \n TIMESTAMP \n NONCE \n hex(SHA-256(body))
//
// with the timestamp (Unix milliseconds), the nonce and the signature (hex)
// in the headers below. A verifier accepts a timestamp within linkSkew of
// its clock and each nonce once while its timestamp is in that window.
const (
	sigTimestampHeader = "X-Regent-Timestamp"
	sigNonceHeader     = "X-Regent-Nonce"
	sigHeader          = "X-Regent-Signature"
	sigDomain          = "regent-admin-v1"

	// linkSkew bounds the clock difference between nodes and a request's
	// time in flight; a captured request is replayable only within it,
	// and only once (nonces).
	linkSkew = 30 * time.Second
	// maxNonces bounds the replay cache: admin requests are rare, so a
	// window holding this many is a flood, refused until it drains.
	maxNonces = 1 << 16
	// minSecretBytes is the shortest secret accepted: 32 bytes, as
	// `regent cluster secret` makes.
	minSecretBytes = 32
)

var (
	errUnsigned    = errors.New("not signed with the cluster secret")
	errBadSig      = errors.New("signature does not match the cluster secret")
	errStale       = errors.New("timestamp outside the allowed clock skew")
	errReplay      = errors.New("nonce already used")
	errNonceFlood  = errors.New("too many signed requests in the replay window")
	errSecretShort = fmt.Errorf("cluster secret shorter than %d bytes", minSecretBytes)
)

// linkAuth signs and verifies admin requests with the cluster secret.
// Safe for concurrent use. A nil *linkAuth signs nothing (cluster links
// on mutual TLS alone).
type linkAuth struct {
	secret []byte // signs, and proves this node on raft links
	// accepted are the secrets a peer's signature or proof may use:
	// secret, then the --cluster-secret-accept-file one while the
	// cluster's secret is being rotated.
	accepted [][]byte
	now      func() time.Time // the clock; time.Now outside tests

	// mu guards seen: nonces accepted, each until its timestamp leaves
	// the window (then its request is refused as stale anyway).
	mu struct {
		sync.Mutex
		seen map[string]time.Time
	}
}

func newLinkAuth(secret []byte) (*linkAuth, error) {
	if len(secret) < minSecretBytes {
		return nil, errSecretShort
	}
	a := &linkAuth{secret: bytes.Clone(secret), now: time.Now}
	a.accepted = [][]byte{a.secret}
	a.mu.seen = map[string]time.Time{}
	return a, nil
}

// accept adds a secret that peers' signatures and proofs may use too.
func (a *linkAuth) accept(secret []byte) error {
	if len(secret) < minSecretBytes {
		return errSecretShort
	}
	a.accepted = append(a.accepted, bytes.Clone(secret))
	return nil
}

// readSecretFile reads a cluster secret: the file's content without
// surrounding white space. The error never holds the secret.
func readSecretFile(path string) (*linkAuth, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	a, err := newLinkAuth(bytes.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("cluster secret %s: %w", path, err)
	}
	return a, nil
}

// readSecretFiles reads the node's cluster secret from path and, if
// acceptPath is set, the second secret it accepts from peers.
func readSecretFiles(path, acceptPath string) (*linkAuth, error) {
	a, err := readSecretFile(path)
	if err != nil || acceptPath == "" {
		return a, err
	}
	raw, err := os.ReadFile(acceptPath)
	if err != nil {
		return nil, fmt.Errorf("accepted cluster secret: %w", err)
	}
	if err := a.accept(bytes.TrimSpace(raw)); err != nil {
		return nil, fmt.Errorf("accepted cluster secret %s: %w", acceptPath, err)
	}
	return a, nil
}

// newSecret is a fresh random secret, printable (base64url of 32 bytes).
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// mac is the signature of one request with this node's secret.
func (a *linkAuth) mac(method, uri, ts, nonce string, body []byte) []byte {
	return macWith(a.secret, method, uri, ts, nonce, body)
}

// macWith is the signature of one request with key.
func macWith(key []byte, method, uri, ts, nonce string, body []byte) []byte {
	digest := sha256.Sum256(body)
	m := hmac.New(sha256.New, key)
	for _, part := range []string{sigDomain, method, uri, ts, nonce} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	m.Write([]byte(hex.EncodeToString(digest[:])))
	return m.Sum(nil)
}

// sign sets req's signature headers for body (req's whole body; nil for
// none). A nil a leaves req as it is.
func (a *linkAuth) sign(req *http.Request, body []byte) {
	if a == nil {
		return
	}
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce := hex.EncodeToString(n[:])
	ts := strconv.FormatInt(a.now().UnixMilli(), 10)
	req.Header.Set(sigTimestampHeader, ts)
	req.Header.Set(sigNonceHeader, nonce)
	req.Header.Set(sigHeader, hex.EncodeToString(a.mac(req.Method, req.URL.RequestURI(), ts, nonce, body)))
}

// checkFresh refuses a request without signature headers or with a
// timestamp outside the window, before its body is read.
func (a *linkAuth) checkFresh(h http.Header) error {
	ts, nonce, sig := h.Get(sigTimestampHeader), h.Get(sigNonceHeader), h.Get(sigHeader)
	if ts == "" || nonce == "" || sig == "" {
		return errUnsigned
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", errUnsigned, ts)
	}
	if d := a.now().Sub(time.UnixMilli(ms)); d > linkSkew || d < -linkSkew {
		return fmt.Errorf("%w: %v off", errStale, d.Round(time.Millisecond))
	}
	return nil
}

// verify checks the signature of a request with method, uri, headers h
// and the whole body, and records its nonce. The comparison is
// constant-time; a nonce is recorded only for a valid signature, so
// forged requests cannot fill the cache.
func (a *linkAuth) verify(method, uri string, h http.Header, body []byte) error {
	if err := a.checkFresh(h); err != nil {
		return err
	}
	ts, nonce := h.Get(sigTimestampHeader), h.Get(sigNonceHeader)
	got, err := hex.DecodeString(h.Get(sigHeader))
	if err != nil {
		return errBadSig
	}
	valid := false
	for _, key := range a.accepted {
		valid = hmac.Equal(got, macWith(key, method, uri, ts, nonce, body)) || valid
	}
	if !valid {
		return errBadSig
	}
	ms, _ := strconv.ParseInt(ts, 10, 64)
	return a.remember(nonce, time.UnixMilli(ms).Add(linkSkew))
}

// remember records nonce until expiry, refusing one already recorded.
func (a *linkAuth) remember(nonce string, expiry time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if exp, ok := a.mu.seen[nonce]; ok && now.Before(exp) {
		return errReplay
	}
	if len(a.mu.seen) >= maxNonces {
		for n, exp := range a.mu.seen {
			if !now.Before(exp) {
				delete(a.mu.seen, n)
			}
		}
		if len(a.mu.seen) >= maxNonces {
			return errNonceFlood
		}
	}
	a.mu.seen[nonce] = expiry
	return nil
}

// guard wraps a state-changing admin handler: it reads the body (at most
// limit bytes: more is 413), checks its signature when a is set (401, and
// a warning naming the caller, when it fails) and hands the handler the
// body again. A nil a checks the size only (mutual TLS has already
// authenticated the caller).
func (a *linkAuth) guard(limit int64, logger *slog.Logger, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		refuse := func(err error) {
			logger.Warn("admin request refused: not authenticated", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err)
			w.Header().Set("WWW-Authenticate", "Regent-HMAC")
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthenticated admin request: " + err.Error()})
		}
		if a != nil {
			if err := a.checkFresh(r.Header); err != nil {
				refuse(err)
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				logger.Warn("admin request refused: body too large", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "limit", limit)
				writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("%s body exceeds the limit of %d bytes", r.URL.Path, limit)})
				return
			}
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "read the body: " + err.Error()})
			return
		}
		if a != nil {
			if err := a.verify(r.Method, r.RequestURI, r.Header, body); err != nil {
				refuse(err)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next(w, r)
	}
}

// raftSecrets are the secrets raft links are authenticated with when
// they are not on TLS (cluster.RaftOptions.LinkSecrets: this node's
// first); nil for a nil a.
func (a *linkAuth) raftSecrets() [][]byte {
	if a == nil {
		return nil
	}
	return a.accepted
}
