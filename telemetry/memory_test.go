package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestMemoryMetrics(t *testing.T) {
	tel, err := New(context.Background(), Config{MetricsListen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	err = tel.ObserveMemory(func() ([]MemoryBudget, []ConnectionsClosed) {
		return []MemoryBudget{{Name: "request", Used: 7, Capacity: 100}, {Name: "fetch", Used: 0, Capacity: 50}},
			[]ConnectionsClosed{{Reason: "write_stall", Count: 2}}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.ObserveHandoffs(func() int64 { return 3 }); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + tel.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`regent_memory_budget_used_bytes{budget="request"`,
		`regent_memory_budget_capacity_bytes{budget="fetch"`,
		`regent_connections_closed_total{`,
		`reason="write_stall"} 2`,
		`regent_connections_handed_off_total{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepRegent(text))
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `regent_memory_budget_used_bytes{budget="request"`) && !strings.HasSuffix(line, " 7") {
			t.Errorf("used line %q, want 7", line)
		}
		if strings.HasPrefix(line, `regent_connections_handed_off_total{`) && !strings.HasSuffix(line, " 3") {
			t.Errorf("handed-off line %q, want 3", line)
		}
	}
	// Off: a no-op.
	var off *Telemetry
	if err := off.ObserveMemory(nil); err != nil {
		t.Fatal(err)
	}
	if err := off.ObserveHandoffs(nil); err != nil {
		t.Fatal(err)
	}
}

func grepRegent(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "regent_memory") || strings.Contains(l, "closed") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBudgetMetrics: each bound's gauge pair (held and limit) shows what
// its reader reports.
func TestBudgetMetrics(t *testing.T) {
	tel, err := New(context.Background(), Config{MetricsListen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	for _, c := range []struct {
		name        string
		observe     func(func() (int64, int64)) error
		held, limit int64
	}{
		{"regent_producer_states", func(f func() (int64, int64)) error { return tel.ObserveProducerStates(f) }, 12, 250000},
		{"regent_transactional_ids", func(f func() (int64, int64)) error { return tel.ObserveTransactionalIDs(f) }, 7, 100000},
		{"regent_groups", func(f func() (int64, int64)) error { return tel.ObserveGroups(f) }, 3, 100001},
		{"regent_partitions", func(f func() (int64, int64)) error { return tel.ObservePartitions(f) }, 5, 50000},
		{"regent_group_pending_members", func(f func() (int64, int64)) error { return tel.ObservePendingMembers(f) }, 9, 100000},
	} {
		if err := c.observe(func() (int64, int64) { return c.held, c.limit }); err != nil {
			t.Fatal(err)
		}
		got := scrapeLines(t, tel, c.name)
		for _, want := range []string{c.name + "{", fmt.Sprintf("} %d", c.held), c.name + "_limit{", fmt.Sprintf("} %d", c.limit)} {
			if !strings.Contains(got, want) {
				t.Errorf("/metrics lacks %q:\n%s", want, got)
			}
		}
	}
	if err := tel.ObserveDiskReserve(func() (int64, bool) { return 8 << 20, true }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"regent_disk_reserve_bytes{", "} 8.388608e+06"} { // Prometheus's float form
		if got := scrapeLines(t, tel, "regent_disk_reserve_bytes"); !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got)
		}
	}
	if got := scrapeLines(t, tel, "regent_disk_appends_held"); !strings.Contains(got, "} 1") {
		t.Errorf("/metrics lacks appends held = 1:\n%s", got)
	}
	var off *Telemetry
	if err := off.ObserveDiskReserve(nil); err != nil {
		t.Fatal(err)
	}
	if err := off.ObserveProducerStates(nil); err != nil {
		t.Fatal(err)
	}
	if err := off.ObserveTransactionalIDs(func() (int64, int64) { return 0, 0 }); err != nil {
		t.Fatal(err)
	}
}

// scrapeLines is the /metrics lines of tel that start with prefix.
func scrapeLines(t *testing.T, tel *Telemetry, prefix string) string {
	t.Helper()
	resp, err := http.Get("http://" + tel.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
