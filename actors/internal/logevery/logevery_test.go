package logevery

import (
	"testing"
	"time"
)

// TestAllowOncePerPeriod: the first line passes, the next within the
// period does not, and a line after it does.
func TestAllowOncePerPeriod(t *testing.T) {
	var l Limiter
	if !l.Allow(time.Hour) {
		t.Fatal("first line held back")
	}
	if l.Allow(time.Hour) {
		t.Fatal("second line within the period let through")
	}
	if !l.Allow(0) {
		t.Fatal("a line after the period held back")
	}
}
