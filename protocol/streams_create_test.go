package protocol

import (
	"testing"
	"time"
)

// TestStartStreamsCreate: an internal topic is created by one heartbeat at
// a time, and after a failure only once streamsCreateRetry has passed.
func TestStartStreamsCreate(t *testing.T) {
	s := &Server{}
	if !s.startStreamsCreate("t") {
		t.Fatal("first heartbeat does not create")
	}
	if s.startStreamsCreate("t") {
		t.Fatal("a second heartbeat creates while the first runs")
	}
	s.streamsCreating.Store("t", time.Now())
	if s.startStreamsCreate("t") {
		t.Fatal("retried right after a failure")
	}
	s.streamsCreating.Store("t", time.Now().Add(-streamsCreateRetry-time.Second))
	if !s.startStreamsCreate("t") {
		t.Fatal("not retried after streamsCreateRetry")
	}
	if s.startStreamsCreate("t") {
		t.Fatal("the retry runs twice")
	}
	s.streamsCreating.Delete("t")
	if !s.startStreamsCreate("t") {
		t.Fatal("not created again once the entry is gone")
	}
}
