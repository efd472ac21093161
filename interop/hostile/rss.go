package hostile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MemStatus is a process's resident memory as /proc/PID/status reports it.
type MemStatus struct {
	RSS int64 // VmRSS, bytes
	HWM int64 // VmHWM: the peak of VmRSS over the process's life, bytes
}

// ReadMemStatus reads VmRSS and VmHWM of pid.
func ReadMemStatus(pid int) (MemStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return MemStatus{}, fmt.Errorf("read status of %d: %w", pid, err)
	}
	var m MemStatus
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			m.RSS, err = parseKB(line)
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			m.HWM, err = parseKB(line)
		}
		if err != nil {
			return MemStatus{}, fmt.Errorf("status of %d: %w", pid, err)
		}
	}
	if m.HWM == 0 {
		return MemStatus{}, fmt.Errorf("status of %d: no VmHWM (a zombie?)", pid)
	}
	return m, nil
}

// parseKB parses "VmRSS:	  12345 kB" into bytes.
func parseKB(line []byte) (int64, error) {
	f := bytes.Fields(line)
	if len(f) != 3 || string(f[2]) != "kB" {
		return 0, fmt.Errorf("unexpected line %q", line)
	}
	n, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("line %q: %w", line, err)
	}
	return n << 10, nil
}

// MemAvailable is the machine's MemAvailable from /proc/meminfo, in bytes.
func MemAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read meminfo: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := sc.Bytes(); bytes.HasPrefix(line, []byte("MemAvailable:")) {
			return parseKB(line)
		}
	}
	return 0, fmt.Errorf("meminfo has no MemAvailable")
}

// RSSWatch samples a process's memory and kills it (with the kill given)
// if its RSS passes a safety cap, so a broker without defences cannot take
// a shared machine's memory.
type RSSWatch struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	once sync.Once

	maxRSS  atomic.Int64 // highest VmRSS sampled
	lastHWM atomic.Int64 // VmHWM of the last good sample
	killed  atomic.Int64 // the RSS at which the cap fired; 0: never
}

// WatchRSS samples pid every interval until Stop.
func WatchRSS(pid int, every time.Duration, safetyCap int64, kill func()) *RSSWatch {
	w := &RSSWatch{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if m, err := ReadMemStatus(pid); err == nil {
				if m.RSS > w.maxRSS.Load() {
					w.maxRSS.Store(m.RSS)
				}
				w.lastHWM.Store(m.HWM)
				if m.RSS > safetyCap && w.killed.Load() == 0 {
					w.killed.Store(m.RSS)
					kill()
				}
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// Stop ends the sampling; idempotent.
func (w *RSSWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// Peak is the process's peak RSS: VmHWM when it could still be read, or
// the highest sample.
func (w *RSSWatch) Peak() int64 {
	if m, err := ReadMemStatus(w.pid); err == nil {
		w.lastHWM.Store(m.HWM)
	}
	return max(w.lastHWM.Load(), w.maxRSS.Load())
}

// KilledAt is the RSS at which the safety cap killed the process; 0: it did not.
func (w *RSSWatch) KilledAt() int64 { return w.killed.Load() }
