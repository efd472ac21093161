package groupconfig

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestCheckAsKafka(t *testing.T) {
	for _, c := range []struct {
		cfg    map[string]string
		broker map[string]string
		err    string // "" ok; else a part of the message
	}{
		{cfg: map[string]string{ConsumerSessionTimeoutMs: "50000"}},
		{cfg: map[string]string{ConsumerSessionTimeoutMs: " 60000 ", ConsumerHeartbeatIntervalMs: "15000"}},
		{cfg: map[string]string{"consumer.bogus": "1"}, err: "Unknown group config name: consumer.bogus"},
		{cfg: map[string]string{ConsumerSessionTimeoutMs: "abc"}, err: "Not a number of type INT"},
		{cfg: map[string]string{ConsumerSessionTimeoutMs: "0"}, err: "Value must be at least 1"},
		{cfg: map[string]string{ConsumerSessionTimeoutMs: "44999"}, err: "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{cfg: map[string]string{ConsumerSessionTimeoutMs: "60001"}, err: "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"},
		{cfg: map[string]string{ConsumerHeartbeatIntervalMs: "4999"}, err: "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"},
		// The broker's bounds widen what a group may set.
		{cfg: map[string]string{ConsumerSessionTimeoutMs: "6000", ConsumerHeartbeatIntervalMs: "1000"},
			broker: map[string]string{"group.consumer.min.session.timeout.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "500"}},
		{cfg: map[string]string{ConsumerSessionTimeoutMs: "2000", ConsumerHeartbeatIntervalMs: "2000"},
			broker: map[string]string{"group.consumer.min.session.timeout.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "500"},
			err:    "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"},
		{cfg: map[string]string{ShareRecordLockDurationMs: "999"}, err: "Value must be at least 1000"},
		{cfg: map[string]string{ShareRecordLockDurationMs: "14999"}, err: "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"},
		{cfg: map[string]string{ShareDeliveryCountLimit: "11"}, err: "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"},
		{cfg: map[string]string{SharePartitionMaxRecordLocks: "4000"}},
		{cfg: map[string]string{ShareAutoOffsetReset: "earliest"}},
		{cfg: map[string]string{ShareAutoOffsetReset: "by_duration:PT1H30M"}},
		{cfg: map[string]string{ShareAutoOffsetReset: "by_duration:P1DT0.5S"}},
		{cfg: map[string]string{ShareAutoOffsetReset: "by_duration:-PT1H"}, err: "Negative duration"},
		{cfg: map[string]string{ShareAutoOffsetReset: "by_duration:1h"}, err: "ISO 8601"},
		{cfg: map[string]string{ShareAutoOffsetReset: "none"}, err: "by_duration"},
		{cfg: map[string]string{ShareIsolationLevel: "read_committed"}},
		{cfg: map[string]string{ShareIsolationLevel: "READ_COMMITTED"}, err: "String must be one of"},
		{cfg: map[string]string{ShareRenewAcknowledgeEnable: "False"}},
		{cfg: map[string]string{ShareRenewAcknowledgeEnable: "yes"}, err: "either true or false"},
		{cfg: map[string]string{StreamsNumStandbyReplicas: "3"}, err: "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"},
		{cfg: map[string]string{StreamsInitialRebalanceDelay: "0"}},
	} {
		_, err := Check(c.cfg, c.broker)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%v: %v", c.cfg, err)
		case c.err != "" && err == nil:
			t.Errorf("%v: accepted, want %q", c.cfg, c.err)
		case c.err != "" && (!strings.Contains(err.Error(), c.err) || !errors.Is(err, kerr.InvalidConfig)):
			t.Errorf("%v: %v, want INVALID_CONFIG with %q", c.cfg, err, c.err)
		}
	}
}

func TestStoreSetValuesReopen(t *testing.T) {
	dir := t.TempDir()
	broker := map[string]string{"group.consumer.heartbeat.interval.ms": "6000"}
	s, err := Open(Options{DataDir: dir, Broker: func() map[string]string { return broker }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("g", map[string]string{ConsumerSessionTimeoutMs: "50000", ShareIsolationLevel: "read_committed", ShareAutoOffsetReset: "by_duration:PT10M"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("g", map[string]string{ConsumerSessionTimeoutMs: "1"}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("out of bounds: %v", err)
	}
	v := s.Values("g")
	if v.ConsumerSessionTimeout != 50*time.Second || v.ConsumerHeartbeatInterval != 6*time.Second || v.ShareIsolationLevel != "read_committed" ||
		v.ShareAutoOffsetResetBy != 10*time.Minute || v.ShareRecordLockDuration != 30*time.Second || !v.ShareRenewAcknowledgeEnable {
		t.Fatalf("values %+v", v)
	}
	if ct := s.Consumer("g"); ct.SessionTimeout != 50*time.Second || ct.HeartbeatInterval != 0 {
		t.Fatalf("consumer overrides %+v", ct)
	}
	if ct := s.Consumer("other"); ct != (ConsumerTimeouts{}) {
		t.Fatalf("other group %+v", ct)
	}
	for _, e := range s.Describe("g") {
		switch e.Name {
		case ConsumerSessionTimeoutMs:
			if e.Value != "50000" || e.Source != SourceGroup {
				t.Fatalf("%+v", e)
			}
		case ConsumerHeartbeatIntervalMs:
			if e.Value != "6000" || e.Source != SourceStaticBroker || len(e.Synonyms) != 1 {
				t.Fatalf("%+v", e)
			}
		case ShareDeliveryCountLimit:
			if e.Value != "5" || e.Source != SourceDefault {
				t.Fatalf("%+v", e)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if got := s.Overrides("g"); len(got) != 3 || got[ConsumerSessionTimeoutMs] != "50000" {
		t.Fatalf("reopened: %v", got)
	}
	if err := s.Set("g", nil); err != nil {
		t.Fatal(err)
	}
	if len(s.Groups()) != 0 {
		t.Fatalf("groups after delete: %v", s.Groups())
	}
	s2, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(s2.Groups()) != 0 {
		t.Fatalf("reloaded: %v", s2.Groups())
	}
}

func TestIncremental(t *testing.T) {
	v := func(s string) *string { return &s }
	next, err := Incremental(map[string]string{ConsumerSessionTimeoutMs: "50000"}, []Op{
		{Key: ConsumerHeartbeatIntervalMs, Value: v("6000")}, {Key: ConsumerSessionTimeoutMs, Op: 1},
	})
	if err != nil || len(next) != 1 || next[ConsumerHeartbeatIntervalMs] != "6000" {
		t.Fatalf("%v %v", next, err)
	}
	if _, err := Incremental(nil, []Op{{Key: ShareIsolationLevel, Value: v("x"), Op: 2}}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("append: %v", err)
	}
	if _, err := Incremental(nil, []Op{{Key: "nope", Value: v("x")}}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("unknown: %v", err)
	}
}

func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1H": time.Hour, "P2D": 48 * time.Hour, "PT1.5S": 1500 * time.Millisecond, "PT-5M": -5 * time.Minute,
		"-PT1M": -time.Minute, "P1DT1H1M1S": 25*time.Hour + time.Minute + time.Second,
	} {
		if got, err := ParseISODuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "1H", "P1H", "PT1D", "PT1.5M", "PTS"} {
		if _, err := ParseISODuration(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
