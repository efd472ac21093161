package protocol

import (
	"fmt"
	"testing"
	"time"
)

// TestStreamsCreations: an internal topic is created by one heartbeat at a
// time, after a failure only once streamsCreateRetry has passed, and the
// failures a client's topic names leave behind do not pile up.
func TestStreamsCreations(t *testing.T) {
	var c streamsCreations
	now := time.Unix(1_700_000_000, 0)
	if !c.start("t", now) {
		t.Fatal("first heartbeat does not create")
	}
	if c.start("t", now) {
		t.Fatal("a second heartbeat creates while the first runs")
	}
	c.done("t", true, now)
	if c.start("t", now.Add(time.Second)) {
		t.Fatal("retried right after a failure")
	}
	if !c.start("t", now.Add(streamsCreateRetry)) {
		t.Fatal("not retried after streamsCreateRetry")
	}
	if c.start("t", now.Add(streamsCreateRetry)) {
		t.Fatal("the retry runs twice")
	}
	c.done("t", false, now.Add(streamsCreateRetry))
	if !c.start("t", now.Add(streamsCreateRetry)) {
		t.Fatal("not created again after a success")
	}
	c.done("t", false, now)

	// 100,000 distinct names failing over time: the failures kept stay
	// near those of the last retry window.
	for i := range 100_000 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		name := fmt.Sprintf("flood-%d", i)
		if !c.start(name, at) {
			t.Fatalf("%s not started", name)
		}
		c.done(name, true, at)
	}
	if n := len(c.failed); n > 2*int(streamsCreateRetry/time.Millisecond)+1024 {
		t.Fatalf("%d failures kept, want about the last %v's", n, streamsCreateRetry)
	}
	if len(c.running) != 0 {
		t.Fatalf("%d creations still marked running", len(c.running))
	}
}
