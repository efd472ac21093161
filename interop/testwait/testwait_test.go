package testwait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the failure and stops the
// calling goroutine, as the real one does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	For(t, "three calls", Default, func() bool { return calls.Add(1) == 3 })
	if n := calls.Load(); n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

func TestForFailsNamingTheCondition(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != r {
				panic(p)
			}
		}()
		For(r, "the impossible", 30*time.Millisecond, func() bool { return false })
	}()
	if !strings.Contains(r.msg, "the impossible") {
		t.Fatalf("failure %q does not name the condition", r.msg)
	}
	if el := time.Since(start); el < 30*time.Millisecond || el > 5*time.Second {
		t.Fatalf("gave up after %v, want about 30ms", el)
	}
}

func TestUntilDoesNotCallAgainAfterSuccess(t *testing.T) {
	var calls int
	if !Until(time.Second, func() bool { calls++; return true }) || calls != 1 {
		t.Fatalf("Until: %d calls", calls)
	}
	if Until(0, func() bool { return false }) {
		t.Fatal("Until(0) of a false condition held")
	}
}
