package brokertest

import "testing"

// StartAt is Start on a given PLAINTEXT address: with --listeners among
// extra (which replaces --listen), addr must be its PLAINTEXT listener,
// which Start waits for.
func StartAt(t testing.TB, addr string, extra ...string) *Broker {
	t.Helper()
	b := &Broker{Dir: t.TempDir(), Args: extra, t: t, Addr: addr}
	b.start()
	t.Cleanup(func() {
		b.Kill()
		if t.Failed() {
			t.Logf("broker log tail:\n%s", b.LogTail(8000))
		}
	})
	return b
}

// StartIn is StartAt on an existing data directory (prepared offline, as
// with `regent users add`).
func StartIn(t testing.TB, dir, addr string, extra ...string) *Broker {
	t.Helper()
	b := &Broker{Dir: dir, Args: extra, t: t, Addr: addr}
	b.start()
	t.Cleanup(func() {
		b.Kill()
		if t.Failed() {
			t.Logf("broker log tail:\n%s", b.LogTail(8000))
		}
	})
	return b
}
