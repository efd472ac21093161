package protocol

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/quotas"
)

// TestRequestTimeQuota: a request's clock runs only with a
// request_percentage quota set and for keys that are not exempt; its time
// is recorded once, at its response, and a violation puts a throttle of at
// most one window in the response and mutes the connection for it.
func TestRequestTimeQuota(t *testing.T) {
	s := groupServer(t)
	qs, err := quotas.Open(quotas.Options{DataDir: t.TempDir(), Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(qs.Close)
	s.SetQuotas(qs, quotas.NewEnforcer(quotas.EnforcerConfig{}, qs.Snapshot))

	newReq := func(key int16, client string) *Request {
		r := NewRequest(Header{Key: key, Version: 7, ClientID: client}, kmsg.NewPtrMetadataRequest())
		r.Conn = &ConnInfo{}
		var start time.Time
		if s.quotaLimits(quotas.RequestPercentage) {
			start = time.Now()
		}
		s.startRequestClock(r, start)
		return r
	}
	if r := newReq(3, "test"); r.clock.srv != nil {
		t.Fatal("the clock runs without a request_percentage quota")
	}
	if _, err := qs.Alter([]quotas.Alteration{{Entity: quotas.Entity{HasClient: true, Client: "test"}, Ops: []quotas.Op{{Key: quotas.RequestPercentage, Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []int16{17, 27, 36} {
		if r := newReq(key, "test"); r.clock.srv != nil {
			t.Fatalf("key %d is exempt, yet its clock runs", key)
		}
	}

	// Spans: finished ones add up; open ones count up to now.
	r := newReq(3, "test")
	if r.clock.srv == nil {
		t.Fatal("no clock with a quota set")
	}
	r.clock.spent.Store(int64(150 * time.Millisecond))
	now := time.Now().UnixNano()
	r.clock.loop.Store(now - int64(30*time.Millisecond))
	r.clock.work.Store(now - int64(20*time.Millisecond))
	if got := r.clock.total(now); got != 200*time.Millisecond {
		t.Fatalf("total %v, want 200ms", got)
	}
	r.clock.end(&r.clock.loop)
	if got := time.Duration(r.clock.spent.Load()); got < 180*time.Millisecond || got > time.Second {
		t.Fatalf("after the loop span ended, spent %v", got)
	}
	r.clock.end(&r.clock.work)
	spent := r.clock.spent.Load()
	if r.clock.end(&r.clock.work); r.clock.spent.Load() != spent {
		t.Fatal("ending a closed span added time")
	}

	// 200 ms over the 10 s a fresh sensor measures is 2% against 1%:
	// Kafka's math gives 10 s, bounded at one window.
	resp := kmsg.NewPtrMetadataResponse()
	before := time.Now()
	s.throttleRequestTime(r, resp)
	if resp.ThrottleMillis != 1000 {
		t.Fatalf("throttle %d ms, want the 1000 ms bound", resp.ThrottleMillis)
	}
	if until := time.Unix(0, r.Conn.Mute.Until()); until.Before(before.Add(time.Second)) || until.After(time.Now().Add(time.Second)) {
		t.Fatalf("muted until %v, want 1 s from now", until)
	}
	// Recorded once: a second response (there is none) changes nothing.
	resp2 := kmsg.NewPtrMetadataResponse()
	s.throttleRequestTime(r, resp2)
	if resp2.ThrottleMillis != 0 {
		t.Fatalf("recorded twice: %d", resp2.ThrottleMillis)
	}
	// A larger throttle already in the response (a byte quota's) stays.
	r3 := newReq(3, "test")
	resp3 := kmsg.NewPtrMetadataResponse()
	resp3.ThrottleMillis = 5000
	s.throttleRequestTime(r3, resp3)
	if resp3.ThrottleMillis != 5000 {
		t.Fatalf("throttle %d, want the larger 5000 kept", resp3.ThrottleMillis)
	}
	// Another client id has no quota: its clock runs (some client has
	// one), but it is never throttled.
	r4 := newReq(3, "other")
	r4.clock.spent.Store(int64(time.Second))
	resp4 := kmsg.NewPtrMetadataResponse()
	s.throttleRequestTime(r4, resp4)
	if resp4.ThrottleMillis != 0 || r4.Conn.Mute.Until() != 0 {
		t.Fatalf("client without a quota throttled %d ms", resp4.ThrottleMillis)
	}
}
