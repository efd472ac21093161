package main

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"512MiB": 512 << 20, "1GiB": 1 << 30, "1G": 1 << 30, "64M": 64 << 20,
		"100": 100, "2KB": 2000, "3 MiB": 3 << 20, "0": 0, "7B": 7,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "1.5GiB", "-1MiB", "12x", "99999999999TiB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
	if got := formatBytes(512 << 20); got != "512MiB" {
		t.Errorf("formatBytes(512 MiB) = %q", got)
	}
}

func TestMaxMemoryFlagAndTwin(t *testing.T) {
	cfg, err := parseConfig([]string{"--max-memory", "1GiB"}, func(string) string { return "" })
	if err != nil || cfg.MaxMemory != 1<<30 {
		t.Fatalf("--max-memory 1GiB: %d, %v", cfg.MaxMemory, err)
	}
	cfg, err = parseConfig(nil, func(k string) string {
		if k == "REGENT_MAX_MEMORY" {
			return "256MiB"
		}
		return ""
	})
	if err != nil || cfg.MaxMemory != 256<<20 {
		t.Fatalf("REGENT_MAX_MEMORY=256MiB: %d, %v", cfg.MaxMemory, err)
	}
	_, err = parseConfig(nil, func(k string) string {
		if k == "REGENT_MAX_MEMORY" {
			return "lots"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "REGENT_MAX_MEMORY") {
		t.Fatalf("a bad REGENT_MAX_MEMORY: %v", err)
	}
	if _, err := parseConfig([]string{"--max-memory", "1MiB"}, func(string) string { return "" }); err == nil {
		t.Fatal("--max-memory 1MiB accepted")
	}
	if cfg, _ := parseConfig(nil, func(string) string { return "" }); cfg.MaxMemory != 512<<20 {
		t.Fatalf("default max memory %d", cfg.MaxMemory)
	}
}
