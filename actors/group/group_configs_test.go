package group

import (
	"testing"
	"time"
)

// TestConsumerGroupOwnTimeouts: a group's consumer.heartbeat.interval.ms
// and consumer.session.timeout.ms (GROUP configs) replace the broker's
// for that group alone, from the next heartbeat on.
func TestConsumerGroupOwnTimeouts(t *testing.T) {
	cfg := testConfig()
	var session, heartbeat time.Duration // the group "g"'s configs; 0: none
	cfg.GroupConsumerTimeouts = func(group string) (time.Duration, time.Duration) {
		if group != "g" {
			return 0, 0
		}
		return session, heartbeat
	}
	h := newHarness(t, cfg)
	topics := fakeTopics{}
	topics.add("t", 2)
	a, b := h.cgMember(topics, "a", "t"), h.cgMember(topics, "b", "t")
	r := a.beat()
	mustOK(t, "a", r)
	if got := time.Duration(r.HeartbeatIntervalMillis) * time.Millisecond; got != cfg.ConsumerHeartbeatInterval {
		t.Fatalf("interval %v, want the broker's %v", got, cfg.ConsumerHeartbeatInterval)
	}
	heartbeat = 7 * time.Second
	r = a.beat()
	mustOK(t, "a", r)
	if r.HeartbeatIntervalMillis != 7000 {
		t.Fatalf("interval %d ms, want the group's 7000", r.HeartbeatIntervalMillis)
	}
	// A longer session than the broker's keeps a silent member past the
	// broker's timeout; it is fenced at the group's.
	session = cfg.ConsumerSessionTimeout + 20*time.Second
	mustOK(t, "b", b.beat())
	mustOK(t, "a", a.beat())
	for elapsed := time.Duration(0); elapsed < cfg.ConsumerSessionTimeout+5*time.Second; elapsed += 5 * time.Second {
		h.advance(5 * time.Second)
		mustOK(t, "a", a.beat())
	}
	if _, ok := h.g.cg.members["b"]; !ok {
		t.Fatal("b fenced at the broker's session timeout, not the group's")
	}
	for elapsed := time.Duration(0); elapsed < 20*time.Second; elapsed += 5 * time.Second {
		h.advance(5 * time.Second)
		mustOK(t, "a", a.beat())
	}
	if _, ok := h.g.cg.members["b"]; ok {
		t.Fatal("b not fenced at the group's session timeout")
	}
}
