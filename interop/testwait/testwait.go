// Package testwait is how tests wait: poll a condition until a deadline,
// never sleep for a guessed time. It imports only the standard library, so
// tests of any package (cluster's own included) can use it.
package testwait

import (
	"testing"
	"time"
)

// Default is the timeout for conditions expected to hold quickly on an
// idle machine: generous, because tests share two cores with other work.
const Default = 10 * time.Second

// maxInterval bounds the pause between polls: short enough that a wait
// ends soon after its condition holds, long enough not to spin on a
// shared machine.
const maxInterval = 20 * time.Millisecond

// For polls cond until it returns true, and fails t with a message naming
// what if it has not within timeout. cond is called on the test's
// goroutine; the first call is immediate, and the pause between calls
// grows from 1ms to 20ms. For calls t.Fatalf, so it must run on the test's
// goroutine.
func For(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Until polls cond as For does and reports whether it held within
// timeout; for callers that fail in their own words, or off the test's
// goroutine.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	interval := time.Millisecond
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(interval, time.Until(deadline)))
		interval = min(2*interval, maxInterval)
	}
	return true
}
