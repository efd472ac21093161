package clientmetrics

import (
	"container/list"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Client is what a telemetry request tells of its client: the selectors a
// subscription's match may name.
type Client struct {
	ClientID        string
	SoftwareName    string
	SoftwareVersion string
	SourceAddress   string
	SourcePort      string
}

func (c Client) selector(k string) string {
	switch k {
	case MatchClientID:
		return c.ClientID
	case MatchSoftwareName:
		return c.SoftwareName
	case MatchSoftwareVersion:
		return c.SoftwareVersion
	case MatchSourceAddress:
		return c.SourceAddress
	case MatchSourcePort:
		return c.SourcePort
	}
	return ""
}

// The compression codecs (Kafka's ids) accepted for pushed metrics, in
// Kafka's order of preference; none (0) is accepted too.
var AcceptedCompression = []int8{4, 3, 1, 2} // zstd, lz4, gzip, snappy

// ManagerConfig bounds the manager; zero values are the defaults.
type ManagerConfig struct {
	// MaxBytes is telemetry.max.bytes: the largest pushed payload, as sent
	// (compressed). Default 1 MiB, as Kafka's.
	MaxBytes int32
	// MaxInstances bounds the client instances kept (least recently used
	// evicted first). Default 16384, Kafka's cache size.
	MaxInstances int
	// Expiry is how long an instance not heard from is kept at least;
	// an instance is kept max(Expiry, 3 × its push interval). Default 60 s.
	Expiry time.Duration
}

func (c ManagerConfig) withDefaults() ManagerConfig {
	if c.MaxBytes <= 0 {
		c.MaxBytes = 1 << 20
	}
	if c.MaxInstances <= 0 {
		c.MaxInstances = 16384
	}
	if c.Expiry <= 0 {
		c.Expiry = 60 * time.Second
	}
	return c
}

// instance is one client instance's subscription and push state. Owned
// by Manager.mu.
type instance struct {
	id             ID
	version        uint64 // the Set version it was computed at
	subscriptionID int32
	metrics        []string
	intervalMs     int32
	// lastGet and lastPush are the times of the last accepted request of
	// each kind (zero: none yet).
	lastGet, lastPush time.Time
	lastAccess        time.Time
	terminating       bool
	lastErr           int16
	elem              *list.Element
}

// Manager keeps client instances (Kafka's ClientMetricsManager): their
// subscription, computed from the subscriptions that match the client,
// and the push timing the broker enforces. Safe for concurrent use; time
// is passed in.
//
// Memory is bounded: at most MaxInstances instances of about 200 bytes
// plus their metric prefixes (16384 × ~300 B ≈ 5 MB by default), the least
// recently used evicted first, and an instance not heard from for
// max(Expiry, 3 × push interval) dropped. A client whose instance was
// dropped is told UNKNOWN_SUBSCRIPTION_ID on its next push and asks again.
type Manager struct {
	cfg  ManagerConfig
	subs func() *Set

	mu struct {
		sync.Mutex
		byID map[ID]*instance
		lru  *list.List // of *instance, most recent at the front
	}
}

// NewManager makes a manager reading subscriptions from subs.
func NewManager(cfg ManagerConfig, subs func() *Set) *Manager {
	m := &Manager{cfg: cfg.withDefaults(), subs: subs}
	m.mu.byID = map[ID]*instance{}
	m.mu.lru = list.New()
	return m
}

// MaxBytes is the telemetry.max.bytes in force.
func (m *Manager) MaxBytes() int32 { return m.cfg.MaxBytes }

// Subscribed is a GetTelemetrySubscriptions answer.
type Subscribed struct {
	InstanceID     ID
	SubscriptionID int32
	// Metrics are the requested prefixes: empty none, [AllMetrics] all.
	Metrics    []string
	IntervalMs int32
}

// Get serves GetTelemetrySubscriptions for id (zero: a new instance id is
// assigned). Errors: THROTTLING_QUOTA_EXCEEDED for a request within the
// push interval of the instance's last one (unless its last push was
// refused for its subscription id or compression, which a client fixes by
// asking again). The returned Subscribed carries the instance id even
// with an error.
func (m *Manager) Get(id ID, c Client, now time.Time) (Subscribed, error) {
	if id == (ID{}) {
		id = newInstanceID()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	in := m.instanceLocked(id, c, now)
	out := Subscribed{InstanceID: id, SubscriptionID: in.subscriptionID, Metrics: in.metrics, IntervalMs: in.intervalMs}
	last := in.lastGet
	if in.lastPush.After(last) {
		last = in.lastPush
	}
	tooEarly := !last.IsZero() && now.Sub(last) < time.Duration(in.intervalMs)*time.Millisecond
	if tooEarly && in.lastErr != kerr.UnknownSubscriptionID.Code && in.lastErr != kerr.UnsupportedCompressionType.Code {
		in.lastErr = kerr.ThrottlingQuotaExceeded.Code
		return out, fmt.Errorf("%w: the request from the client instance %s was made too early", kerr.ThrottlingQuotaExceeded, id)
	}
	in.lastGet = now
	in.lastErr = 0
	return out, nil
}

// Push is a PushTelemetry's header.
type Push struct {
	InstanceID     ID
	SubscriptionID int32
	Terminating    bool
	Compression    int8
	Size           int // bytes of the pushed payload as sent
}

// Push checks a PushTelemetry as Kafka does, in Kafka's order, and records
// it: INVALID_REQUEST for a zero instance id or after a terminating push;
// THROTTLING_QUOTA_EXCEEDED before the push interval (a terminating push
// and the first push after a Get are let through); UNKNOWN_SUBSCRIPTION_ID
// when the subscription changed; UNSUPPORTED_COMPRESSION_TYPE;
// TELEMETRY_TOO_LARGE past MaxBytes. On nil the caller exports the
// payload and reports the outcome with Exported.
func (m *Manager) Push(p Push, c Client, now time.Time) error {
	if p.InstanceID == (ID{}) {
		return fmt.Errorf("%w: invalid request from the client [%s], invalid client instance id", kerr.InvalidRequest, p.InstanceID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	in := m.instanceLocked(p.InstanceID, c, now)
	err := m.checkPushLocked(in, p, now)
	if err != nil {
		in.lastErr = codeOf(err)
		return err
	}
	if p.Terminating {
		in.terminating = true
	}
	in.lastErr = 0
	return nil
}

func (m *Manager) checkPushLocked(in *instance, p Push, now time.Time) error {
	if in.terminating {
		return fmt.Errorf("%w: client [%s] sent the previous request with state terminating to TRUE, can not accept any requests after that", kerr.InvalidRequest, p.InstanceID)
	}
	// A push right after a Get may come early: the client jitters its
	// interval (0.5 to 1.5 of it).
	accept := in.lastGet.After(in.lastPush) || in.lastPush.IsZero() && in.lastGet.IsZero() ||
		now.Sub(in.lastPush) >= time.Duration(in.intervalMs)*time.Millisecond
	if accept {
		in.lastPush = now
	} else if !p.Terminating {
		return fmt.Errorf("%w: request from the client [%s] arrived before the next push interval time", kerr.ThrottlingQuotaExceeded, p.InstanceID)
	}
	if p.SubscriptionID != in.subscriptionID {
		return fmt.Errorf("%w: unknown client subscription id for the client [%s]", kerr.UnknownSubscriptionID, p.InstanceID)
	}
	if p.Compression != 0 && !slices.Contains(AcceptedCompression, p.Compression) {
		return fmt.Errorf("%w: unknown compression type [%d] is received in telemetry request from [%s]", kerr.UnsupportedCompressionType, p.Compression, p.InstanceID)
	}
	if p.Size > int(m.cfg.MaxBytes) {
		return fmt.Errorf("%w: telemetry request from [%s] is larger than the maximum allowed size [%d]", kerr.TelemetryTooLarge, p.InstanceID, m.cfg.MaxBytes)
	}
	return nil
}

// Exported records the outcome of exporting an accepted push: a payload
// that did not decode is INVALID_RECORD, remembered as the instance's last
// error.
func (m *Manager) Exported(id ID, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if in, ok := m.mu.byID[id]; ok {
		in.lastErr = codeOf(err)
	}
}

// Len is the number of instances kept.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.mu.byID)
}

// instanceLocked finds or makes id's instance, recomputing its
// subscription when the subscriptions changed since, and drops expired and
// surplus instances.
func (m *Manager) instanceLocked(id ID, c Client, now time.Time) *instance {
	m.expireLocked(now)
	set := m.subs()
	in, ok := m.mu.byID[id]
	if ok && in.version == set.Version {
		in.lastAccess = now
		m.mu.lru.MoveToFront(in.elem)
		return in
	}
	if ok {
		m.removeLocked(in)
	}
	in = newInstance(id, c, set)
	in.lastAccess = now
	in.elem = m.mu.lru.PushFront(in)
	m.mu.byID[id] = in
	for len(m.mu.byID) > m.cfg.MaxInstances {
		m.removeLocked(m.mu.lru.Back().Value.(*instance))
	}
	return in
}

// expireLocked drops instances not heard from for their expiry, looking
// from the least recently used end; it stops at the first one still live
// (an instance with a longer interval may shield a few expired ones
// behind it until it expires or the size bound evicts them).
func (m *Manager) expireLocked(now time.Time) {
	for e := m.mu.lru.Back(); e != nil; e = m.mu.lru.Back() {
		in := e.Value.(*instance)
		ttl := max(m.cfg.Expiry, 3*time.Duration(in.intervalMs)*time.Millisecond)
		if now.Sub(in.lastAccess) < ttl {
			return
		}
		m.removeLocked(in)
	}
}

func (m *Manager) removeLocked(in *instance) {
	m.mu.lru.Remove(in.elem)
	delete(m.mu.byID, in.id)
}

// newInstance computes id's subscription from the subscriptions matching
// c: the union of their metrics (AllMetrics alone when one subscribes
// all) and the least of their intervals (Kafka's default with none).
func newInstance(id ID, c Client, set *Set) *instance {
	in := &instance{id: id, version: set.Version, intervalMs: DefaultIntervalMs}
	matched, all := false, false
	var metrics []string
	for _, s := range set.Subs {
		if !s.matchesInstance(c, id) {
			continue
		}
		if !matched || s.IntervalMs < in.intervalMs {
			in.intervalMs = s.IntervalMs
		}
		matched = true
		for _, p := range s.Metrics {
			all = all || p == AllMetrics
			if !slices.Contains(metrics, p) {
				metrics = append(metrics, p)
			}
		}
	}
	if all {
		metrics = []string{AllMetrics}
	}
	slices.Sort(metrics)
	in.metrics = metrics
	in.subscriptionID = subscriptionID(metrics, in.intervalMs, id)
	return in
}

func (s Subscription) matchesInstance(c Client, id ID) bool {
	if re, ok := s.Match[MatchInstanceID]; ok && !re.MatchString(id.String()) {
		return false
	}
	for k, re := range s.Match {
		if k != MatchInstanceID && !re.MatchString(c.selector(k)) {
			return false
		}
	}
	return true
}

// subscriptionID hashes what the client is asked for (as Kafka: a CRC-32C
// of the metrics and the instance id, plus the interval), so it changes
// when the subscription does.
func subscriptionID(metrics []string, intervalMs int32, id ID) int32 {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write([]byte(strings.Join(metrics, ",")))
	h.Write([]byte(id.String()))
	return int32(h.Sum32()) + intervalMs
}

// newInstanceID is a random (version 4) UUID; never zero, and never
// Kafka's other reserved id (…0001, the metadata topic's).
func newInstanceID() ID {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		if binary.BigEndian.Uint64(b[:8]) != 0 || binary.BigEndian.Uint64(b[8:]) > 1 {
			return ID(b)
		}
	}
}

// ID is a client instance id (a Kafka Uuid).
type ID [16]byte

// String is Kafka's form of a Uuid: URL-safe base64 without padding.
func (id ID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
