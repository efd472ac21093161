package clientmetrics

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func mustSub(t *testing.T, name string, cfg map[string]string) Subscription {
	t.Helper()
	s, err := Parse(name, cfg)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return s
}

func setOf(version uint64, subs ...Subscription) *Set { return &Set{Version: version, Subs: subs} }

var javaClient = Client{ClientID: "producer-1", SoftwareName: "apache-kafka-java", SoftwareVersion: "4.3.1", SourceAddress: "127.0.0.1", SourcePort: "50000"}

func TestParseRefusesAsKafka(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  map[string]string
		want *kerr.Error
	}{
		{"", map[string]string{"metrics": "a"}, kerr.InvalidRequest},
		{"s", map[string]string{"bogus": "1"}, kerr.InvalidRequest},
		{"s", map[string]string{"interval.ms": "99"}, kerr.InvalidConfig},
		{"s", map[string]string{"interval.ms": "3600001"}, kerr.InvalidConfig},
		{"s", map[string]string{"interval.ms": "x"}, kerr.InvalidConfig},
		{"s", map[string]string{"match": "client_id"}, kerr.InvalidConfig},
		{"s", map[string]string{"match": "tenant=x"}, kerr.InvalidConfig},
		{"s", map[string]string{"match": "client_id=("}, kerr.InvalidConfig},
	} {
		_, err := Parse(tc.name, tc.cfg)
		if !errors.Is(err, tc.want) {
			t.Errorf("Parse(%q, %v) = %v, want %v", tc.name, tc.cfg, err, tc.want)
		}
	}
	s := mustSub(t, "s", map[string]string{"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.", "interval.ms": "100", "match": "client_id=producer-.*,client_software_name=apache-kafka-java"})
	if len(s.Metrics) != 2 || s.IntervalMs != 100 || len(s.Match) != 2 {
		t.Fatalf("parsed %+v", s)
	}
}

func TestIncremental(t *testing.T) {
	set, del, app, sub := "org.a.,org.b.", "", "org.c.", "org.a."
	next, err := Incremental("s", nil, []Op{{Key: KeyMetrics, Value: &set, Op: OpSet}, {Key: KeyMetrics, Value: &app, Op: OpAppend}, {Key: KeyMetrics, Value: &sub, Op: OpSubtract}})
	if err != nil || next[KeyMetrics] != "org.b.,org.c." {
		t.Fatalf("got %v, %v", next, err)
	}
	next, err = Incremental("s", next, []Op{{Key: KeyMetrics, Value: &del, Op: OpDelete}})
	if err != nil || len(next) != 0 {
		t.Fatalf("delete: %v, %v", next, err)
	}
	iv := "1000"
	if _, err := Incremental("s", nil, []Op{{Key: KeyInterval, Value: &iv, Op: OpAppend}}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("APPEND on interval.ms: %v", err)
	}
}

func TestSubscriptionMatching(t *testing.T) {
	producers := mustSub(t, "producers", map[string]string{"metrics": "org.apache.kafka.producer.", "interval.ms": "2000", "match": "client_id=producer-.*"})
	java := mustSub(t, "java", map[string]string{"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000", "match": "client_software_name=apache-kafka-java,client_software_version=4\\..*"})
	other := mustSub(t, "other", map[string]string{"metrics": "x.", "match": "client_source_address=10\\..*"})
	m := NewManager(ManagerConfig{}, func() *Set { return setOf(1, java, other, producers) })
	now := time.Unix(1000, 0)
	got, err := m.Get(ID{}, javaClient, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.InstanceID == (ID{}) {
		t.Fatal("no instance id assigned")
	}
	if want := []string{"org.apache.kafka.consumer.", "org.apache.kafka.producer."}; !equal(got.Metrics, want) || got.IntervalMs != 1000 {
		t.Fatalf("got %v every %d ms, want %v every 1000", got.Metrics, got.IntervalMs, want)
	}
	// Another client matches nothing: no metrics, Kafka's default interval.
	got2, err := m.Get(ID{}, Client{ClientID: "c", SourceAddress: "127.0.0.1"}, now)
	if err != nil || len(got2.Metrics) != 0 || got2.IntervalMs != DefaultIntervalMs {
		t.Fatalf("unmatched client: %+v %v", got2, err)
	}
	if got2.InstanceID == got.InstanceID {
		t.Fatal("two new instances got the same id")
	}
	// A whole-value match: "producer-1x" is not "producer-1".
	exact := mustSub(t, "exact", map[string]string{"metrics": "a.", "match": "client_id=producer-1"})
	m2 := NewManager(ManagerConfig{}, func() *Set { return setOf(1, exact) })
	g, _ := m2.Get(ID{}, Client{ClientID: "producer-1x"}, now)
	if len(g.Metrics) != 0 {
		t.Fatalf("partial match selected: %v", g.Metrics)
	}
	// client_instance_id matches Kafka's string form of the id.
	id := ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	byID := mustSub(t, "byid", map[string]string{"metrics": "*", "match": "client_instance_id=" + id.String()})
	m3 := NewManager(ManagerConfig{}, func() *Set { return setOf(1, byID, producers) })
	g, _ = m3.Get(id, javaClient, now)
	if !equal(g.Metrics, []string{AllMetrics}) || g.InstanceID != id {
		t.Fatalf("all metrics by instance id: %+v", g)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSubscriptionIDChangesWithSubscription(t *testing.T) {
	cur := setOf(1, mustSub(t, "s", map[string]string{"metrics": "a.", "interval.ms": "1000"}))
	m := NewManager(ManagerConfig{}, func() *Set { return cur })
	now := time.Unix(1000, 0)
	g, _ := m.Get(ID{}, javaClient, now)
	// The same subscriptions give the same id (another broker, a restart).
	other := NewManager(ManagerConfig{}, func() *Set { return cur })
	g2, _ := other.Get(g.InstanceID, javaClient, now)
	if g2.SubscriptionID != g.SubscriptionID {
		t.Fatalf("subscription id not deterministic: %d vs %d", g.SubscriptionID, g2.SubscriptionID)
	}
	now = now.Add(time.Second)
	if err := m.Push(Push{InstanceID: g.InstanceID, SubscriptionID: g.SubscriptionID}, javaClient, now); err != nil {
		t.Fatal(err)
	}
	cur = setOf(2, mustSub(t, "s", map[string]string{"metrics": "a.,b.", "interval.ms": "1000"}))
	now = now.Add(time.Second)
	err := m.Push(Push{InstanceID: g.InstanceID, SubscriptionID: g.SubscriptionID}, javaClient, now)
	if !errors.Is(err, kerr.UnknownSubscriptionID) {
		t.Fatalf("push with the old subscription id: %v", err)
	}
	// The client asks again at once: not throttled after that error.
	g3, err := m.Get(g.InstanceID, javaClient, now.Add(time.Millisecond))
	if err != nil || g3.SubscriptionID == g.SubscriptionID || len(g3.Metrics) != 2 {
		t.Fatalf("re-get: %+v %v", g3, err)
	}
}

func TestPushTimingAndErrors(t *testing.T) {
	cur := setOf(1, mustSub(t, "s", map[string]string{"metrics": "a.", "interval.ms": "1000"}))
	m := NewManager(ManagerConfig{MaxBytes: 100}, func() *Set { return cur })
	t0 := time.Unix(1000, 0)
	g, _ := m.Get(ID{}, javaClient, t0)
	push := func(at time.Duration, p Push) error {
		p.InstanceID = g.InstanceID
		if p.SubscriptionID == 0 {
			p.SubscriptionID = g.SubscriptionID
		}
		return m.Push(p, javaClient, t0.Add(at))
	}
	if _, err := m.Get(g.InstanceID, javaClient, t0.Add(500*time.Millisecond)); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("second get within the interval: %v", err)
	}
	// The first push after a get may come early (the client's jitter).
	if err := push(400*time.Millisecond, Push{}); err != nil {
		t.Fatalf("first push: %v", err)
	}
	if err := push(900*time.Millisecond, Push{}); !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("push 500 ms after the last: %v", err)
	}
	if err := push(1400*time.Millisecond, Push{}); err != nil {
		t.Fatalf("push an interval after the last: %v", err)
	}
	if err := push(2400*time.Millisecond, Push{Compression: 9}); !errors.Is(err, kerr.UnsupportedCompressionType) {
		t.Fatalf("unknown codec: %v", err)
	}
	if err := push(3400*time.Millisecond, Push{Size: 101}); !errors.Is(err, kerr.TelemetryTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if err := push(4400*time.Millisecond, Push{SubscriptionID: g.SubscriptionID + 1}); !errors.Is(err, kerr.UnknownSubscriptionID) {
		t.Fatalf("wrong subscription: %v", err)
	}
	// A terminating push is taken even early; nothing after it.
	if err := push(4500*time.Millisecond, Push{Terminating: true, Compression: 4}); err != nil {
		t.Fatalf("terminating: %v", err)
	}
	if err := push(9000*time.Millisecond, Push{}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("push after terminating: %v", err)
	}
	if err := m.Push(Push{}, javaClient, t0); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("zero instance id: %v", err)
	}
}

func TestInstancesBounded(t *testing.T) {
	cur := setOf(1, mustSub(t, "s", map[string]string{"metrics": "a.", "interval.ms": "1000"}))
	m := NewManager(ManagerConfig{MaxInstances: 100, Expiry: time.Minute}, func() *Set { return cur })
	now := time.Unix(1000, 0)
	first, _ := m.Get(ID{}, javaClient, now)
	// A hostile client inventing ids: the cache stays at its bound.
	for i := 0; i < 1000; i++ {
		if _, err := m.Get(ID{}, javaClient, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Len(); n != 100 {
		t.Fatalf("%d instances kept, want the bound 100", n)
	}
	if _, ok := m.mu.byID[first.InstanceID]; ok {
		t.Fatal("the least recently used instance was not evicted")
	}
	// Expiry: a minute later (3 × 1 s < 60 s) everything not heard from goes.
	m.Get(ID{}, javaClient, now.Add(time.Minute+time.Second))
	if n := m.Len(); n != 1 {
		t.Fatalf("%d instances after expiry, want 1", n)
	}
}
