package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// gcPercent reads the runtime's GC percent: SetGCPercent returns the
// previous value, so setting it straight back leaves it unchanged.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func TestTuneGCEnvironmentOverride(t *testing.T) {
	orig := gcPercent()
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	// A value neither the runtime's default nor ours, so a change shows.
	const sentinel = 137
	for _, env := range []map[string]string{
		{"GOGC": "50"},
		{"GOGC": "off"},
		{"GOMEMLIMIT": "1GiB"},
		{"GOGC": "200", "GOMEMLIMIT": "512MiB"},
	} {
		debug.SetGCPercent(sentinel)
		var logs bytes.Buffer
		changed := tuneGC(func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(&logs, nil)))
		if changed {
			t.Errorf("env %v: tuneGC reports it changed the runtime", env)
		}
		if got := gcPercent(); got != sentinel {
			t.Errorf("env %v: GC percent %d, want %d left alone", env, got, sentinel)
		}
		if n := strings.Count(logs.String(), "level=INFO"); n != 1 || !strings.Contains(logs.String(), "left as the environment set it") {
			t.Errorf("env %v: want one info line saying the environment chose, got %q", env, logs.String())
		}
	}
}

func TestTuneGCDefault(t *testing.T) {
	orig := gcPercent()
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	debug.SetGCPercent(100)
	var logs bytes.Buffer
	// Empty values count as unset, as the runtime treats them.
	env := map[string]string{"GOGC": "", "GOMEMLIMIT": ""}
	if !tuneGC(func(k string) string { return env[k] }, slog.New(slog.NewTextHandler(&logs, nil))) {
		t.Fatal("tuneGC did not apply the default with no GOGC or GOMEMLIMIT")
	}
	if got := gcPercent(); got != defaultGCPercent {
		t.Fatalf("GC percent %d, want %d", got, defaultGCPercent)
	}
	if n := strings.Count(logs.String(), "level=INFO"); n != 1 || !strings.Contains(logs.String(), "gc_percent=") {
		t.Fatalf("want one info line with the chosen gc_percent, got %q", logs.String())
	}
}
