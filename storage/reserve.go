package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Reserve is disk space held back in a file of its own, so that the writes
// which free space can still be made once the disk is full: a topic's
// deletion rewrites the topic registry, and DeleteRecords and retention
// persist the new log start offset, before any segment goes. Without it a
// full disk stayed full: the write that would have let the segments go
// needed a block itself.
//
// WithRoom runs such a write; if it fails for want of space, the reserve
// file is deleted and the write tried once more. Appends are then refused
// (if the reserve was made with holdAppends) until Refill has made the
// reserve again, so the space the deletion frees goes back to the reserve
// before producers can take it.
//
// Ownership: mu serializes release and refill; held and appendsHeld are
// read without it, by any goroutine (appends check appendsHeld).
type Reserve struct {
	path        string
	size        int64
	holdAppends bool
	logger      *slog.Logger

	mu          sync.Mutex
	held        atomic.Bool // the file exists at its full size
	appendsHeld atomic.Bool
	refillFails int // refills that found no room since the release; under mu
}

// DefaultReserveBytes is the reserve's size: room for a topic registry of
// some ten thousand topics, far more than a log start checkpoint needs.
const DefaultReserveBytes = 8 << 20

// OpenReserve makes (or finds) the reserve file at path. A disk too full
// to make it is not an error: the broker runs without one, says so, and
// Refill makes it once there is room.
func OpenReserve(path string, size int64, holdAppends bool, logger *slog.Logger) *Reserve {
	r := &Reserve{path: path, size: size, holdAppends: holdAppends, logger: logger}
	if st, err := os.Stat(path); err == nil && st.Size() == size {
		r.held.Store(true)
		return r
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.create(); err != nil {
		logger.Warn("no disk reserve: the disk is too full to hold one back; a topic deletion on a full disk may fail until it is made",
			"path", path, "bytes", size, "err", err)
	}
	return r
}

// create writes the reserve file; on failure nothing of it is left. Under mu.
func (r *Reserve) create() error {
	err := fillReserveFile(r.path, r.size)
	if err != nil {
		_ = os.Remove(r.path)
		return err
	}
	r.held.Store(true)
	return nil
}

func fillReserveFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	// Allocated blocks hold the space as well as written ones, and cost no
	// writes; where fallocate fails, zeros are written (and fail the same
	// way on a full disk).
	left := size
	if allocate(f, size) == nil {
		left = 0
	}
	zeros := make([]byte, 1<<20)
	for left > 0 {
		n := min(left, int64(len(zeros)))
		if _, err := f.Write(zeros[:n]); err != nil {
			_ = f.Close()
			return fmt.Errorf("write disk reserve %s: %w", path, err)
		}
		left -= n
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync disk reserve %s: %w", path, err)
	}
	return f.Close()
}

// IsNoSpace reports whether err is a full disk or an exhausted quota.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// WithRoom runs write, a write that lets space be freed (what says which);
// if it fails for want of space, the reserve is released (if held) and
// write runs once more: writes failing together (DeleteRecords of several
// partitions) all get the room one release made. A nil Reserve just runs
// write.
func (r *Reserve) WithRoom(what string, write func() error) error {
	err := write()
	if r == nil || !IsNoSpace(err) {
		return err
	}
	r.release(what, err)
	return write()
}

// release deletes the reserve file, holding appends first (if asked) so
// that none takes the space it frees; nothing if it is not held.
func (r *Reserve) release(what string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held.Load() {
		return
	}
	if r.holdAppends {
		r.appendsHeld.Store(true)
	}
	if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.appendsHeld.Store(false)
		r.logger.Error("disk full, and the disk reserve could not be released", "path", r.path, "for", what, "err", err)
		return
	}
	r.held.Store(false)
	r.refillFails = 0
	r.logger.Warn("disk full: released the disk reserve so that a write freeing space can be made; appends are refused until the reserve is made again, once there is room",
		"for", what, "bytes", r.size, "cause", cause, "appends_held", r.holdAppends)
}

// Refill makes the reserve again if it is missing and there is room, then
// lets appends through. Called periodically; cheap while the reserve is
// held.
func (r *Reserve) Refill() {
	if r == nil || r.held.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held.Load() {
		return
	}
	// Not worth a try (writing what fits, then removing it) every second
	// while the disk stays full.
	err := errNoRoomYet
	if free := freeBytes(r.path); free < 0 || free >= r.size {
		err = r.create()
	}
	if err != nil {
		if r.refillFails++; r.refillFails == 1 || r.refillFails%60 == 0 {
			r.logger.Warn("the disk reserve cannot be made again yet: the disk is still full; delete topics or records, or grow the volume",
				"path", r.path, "bytes", r.size, "appends_held", r.appendsHeld.Load(), "err", err)
		}
		return
	}
	if r.appendsHeld.Swap(false) {
		r.logger.Info("disk reserve made again; appends resume", "path", r.path, "bytes", r.size)
	} else {
		r.logger.Info("disk reserve made", "path", r.path, "bytes", r.size)
	}
}

var errNoRoomYet = errors.New("less free space than the reserve's size")

// Held reports whether the reserve file is in place.
func (r *Reserve) Held() bool { return r != nil && r.held.Load() }

// State is what the reserve holds back now (its size, or 0 once used and
// not made again) and whether appends are refused meanwhile; any goroutine.
func (r *Reserve) State() (heldBytes int64, appendsHeld bool) {
	if r == nil {
		return 0, false
	}
	if r.held.Load() {
		heldBytes = r.size
	}
	return heldBytes, r.appendsHeld.Load()
}

// errAppendsHeld is what appends get while the released reserve waits to
// be made again; it is a full disk to whoever answers it.
var errAppendsHeld = fmt.Errorf("disk full: appends wait until the disk reserve is made again: %w", syscall.ENOSPC)

// appendsRefused is errAppendsHeld while appends are held, else nil.
func (r *Reserve) appendsRefused() error {
	if r != nil && r.appendsHeld.Load() {
		return errAppendsHeld
	}
	return nil
}

// currentReserve is the process's reserve (SetReserve), nil without one.
var currentReserve atomic.Pointer[Reserve]

// SetReserve makes r the reserve that logs' start-offset writes and
// appends consult (the broker has one data directory).
func SetReserve(r *Reserve) { currentReserve.Store(r) }

// CurrentReserve is SetReserve's reserve, or nil.
func CurrentReserve() *Reserve { return currentReserve.Load() }
