package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReserveGivesRoomOnce: a write that fails for want of space is made
// again once the reserve is released; appends are held until Refill makes
// the reserve again; a second failure finds no reserve and stays a failure.
func TestReserveGivesRoomOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "disk-reserve")
	r := OpenReserve(path, 1<<20, true, slog.New(slog.DiscardHandler))
	if st, err := os.Stat(path); err != nil || st.Size() != 1<<20 || !r.Held() {
		t.Fatalf("reserve file: %v %v, held %v", st, err, r.Held())
	}
	full := fmt.Errorf("write topics.json: %w", syscall.ENOSPC)

	// Space to spare: the write is made once, the reserve stays.
	calls := 0
	if err := r.WithRoom("test", func() error { calls++; return nil }); err != nil || calls != 1 || !r.Held() {
		t.Fatalf("a write with room: err %v, calls %d, held %v", err, calls, r.Held())
	}
	// Another error than a full disk is not retried.
	other := errors.New("permission denied")
	calls = 0
	if err := r.WithRoom("test", func() error { calls++; return other }); err != other || calls != 1 || !r.Held() {
		t.Fatalf("another error: err %v, calls %d, held %v", err, calls, r.Held())
	}

	// Full: released, made the second time, appends held.
	calls = 0
	err := r.WithRoom("test", func() error {
		calls++
		if calls == 1 {
			return full
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("a write on a full disk: err %v after %d calls, want it made on the second", err, calls)
	}
	if r.Held() {
		t.Error("the reserve is still held after it was used")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the reserve file is still there: %v", err)
	}
	if err := r.appendsRefused(); !IsNoSpace(err) {
		t.Errorf("appends after the release: %v, want a full disk", err)
	}

	// Without the reserve a full disk stays a failure (tried once more:
	// another write's release may have made room meanwhile).
	calls = 0
	if err := r.WithRoom("test", func() error { calls++; return full }); !errors.Is(err, syscall.ENOSPC) || calls != 2 {
		t.Errorf("a second full disk without a reserve: err %v, calls %d", err, calls)
	}

	r.Refill()
	if !r.Held() || r.appendsRefused() != nil {
		t.Errorf("after Refill: held %v, appends %v", r.Held(), r.appendsRefused())
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 1<<20 {
		t.Errorf("the reserve file after Refill: %v %v", st, err)
	}

	// A nil reserve (--disk-reserve 0) runs the write once.
	var none *Reserve
	calls = 0
	if err := none.WithRoom("test", func() error { calls++; return full }); !errors.Is(err, syscall.ENOSPC) || calls != 1 {
		t.Errorf("nil reserve: err %v, calls %d", err, calls)
	}
	none.Refill()
}

// TestReserveWithoutHoldingAppends: a cluster node's reserve lets appends
// go on after it is used.
func TestReserveWithoutHoldingAppends(t *testing.T) {
	r := OpenReserve(filepath.Join(t.TempDir(), "disk-reserve"), 64<<10, false, slog.New(slog.DiscardHandler))
	calls := 0
	_ = r.WithRoom("test", func() error {
		if calls++; calls == 1 {
			return syscall.ENOSPC
		}
		return nil
	})
	if r.Held() || calls != 2 {
		t.Fatalf("held %v after %d calls", r.Held(), calls)
	}
	if err := r.appendsRefused(); err != nil {
		t.Errorf("appends refused without holdAppends: %v", err)
	}
}

// TestHeldAppendsAreRefused: while the process's reserve holds appends, a
// log refuses them with a full disk and writes nothing; once it is made
// again they go on.
func TestHeldAppendsAreRefused(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	r := OpenReserve(filepath.Join(t.TempDir(), "disk-reserve"), 64<<10, true, slog.New(slog.DiscardHandler))
	SetReserve(r)
	t.Cleanup(func() { SetReserve(nil) })
	if _, _, err := l.Append(simpleBatch(t, 3, 10, 1000)); err != nil {
		t.Fatal(err)
	}
	_ = r.WithRoom("test", func() error { return syscall.ENOSPC })
	if _, _, err := l.Append(simpleBatch(t, 3, 10, 1000)); !IsNoSpace(err) {
		t.Fatalf("append while held: %v, want a full disk", err)
	}
	if got := l.NextOffset(); got != 3 {
		t.Errorf("next offset %d after a refused append, want 3", got)
	}
	r.Refill()
	if base, _, err := l.Append(simpleBatch(t, 3, 10, 1000)); err != nil || base != 3 {
		t.Errorf("append after Refill: base %d, %v", base, err)
	}
}
