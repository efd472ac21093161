package replication

import (
	"errors"
	"fmt"
	"testing"
)

type resultWithFailure struct{ err error }

func (r resultWithFailure) LocalFailure() error { return r.err }

func TestFailedLocally(t *testing.T) {
	cause := errors.New("no space left on device")
	local := MarkLocal(fmt.Errorf("persist: %w", cause))
	if !errors.Is(local, cause) {
		t.Fatal("MarkLocal hides its cause from errors.Is")
	}
	if MarkLocal(local) != local {
		t.Fatal("MarkLocal marks an already-marked error again")
	}
	wrapped := fmt.Errorf("append marker: %w", local)
	for _, c := range []struct {
		name   string
		result any
		want   bool
	}{
		{"nil", nil, false},
		{"plain error", errors.New("INVALID_REQUEST"), false},
		{"marked error", local, true},
		{"wrapped marked error", wrapped, true},
		{"result struct without", resultWithFailure{}, false},
		{"result struct with", resultWithFailure{local}, true},
		{"per-item errors", []error{nil, errors.New("x"), local}, true},
		{"entry results", []any{nil, resultWithFailure{}, []error{local}}, true},
		{"entry results without", []any{nil, errors.New("x")}, false},
		{"a value", 42, false},
		{"MarkLocal(nil)", MarkLocal(nil), false},
	} {
		if got := FailedLocally(c.result) != nil; got != c.want {
			t.Errorf("%s: FailedLocally = %v, want %v", c.name, got, c.want)
		}
	}
}
