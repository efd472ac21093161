package cluster

import (
	"errors"
	"testing"
	"time"
)

// scriptedRepl answers every proposal with a fixed result, at once or
// never.
type scriptedRepl struct {
	res  any
	err  error
	hang bool
}

func (r *scriptedRepl) Register(string, Applier) {}
func (r *scriptedRepl) Unregister(string)        {}
func (r *scriptedRepl) Propose(_ string, _ Command, done func(any, error)) {
	if !r.hang {
		done(r.res, r.err)
	}
}

func TestProposeWait(t *testing.T) {
	applyErr := errors.New("refused by apply")
	cases := []struct {
		name    string
		repl    *scriptedRepl
		wantRes any
		wantIs  error
	}{
		{"applied", &scriptedRepl{res: 7}, 7, nil},
		{"apply error", &scriptedRepl{res: applyErr}, nil, applyErr},
		{"not leader", &scriptedRepl{err: ErrNotLeader}, nil, ErrNotLeader},
		{"replicator failed", &scriptedRepl{err: errors.New("leadership lost")}, nil, ErrOutcomeUnknown},
		{"timed out", &scriptedRepl{hang: true}, nil, ErrOutcomeUnknown},
	}
	for _, c := range cases {
		res, err := ProposeWait(c.repl, "k", nil, 20*time.Millisecond)
		if res != c.wantRes || !errors.Is(err, c.wantIs) || (c.wantIs == nil) != (err == nil) {
			t.Errorf("%s: got (%v, %v), want (%v, %v)", c.name, res, err, c.wantRes, c.wantIs)
		}
	}
}
