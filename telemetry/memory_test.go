package telemetry

import (
	"context"
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
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepRegent(text))
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `regent_memory_budget_used_bytes{budget="request"`) && !strings.HasSuffix(line, " 7") {
			t.Errorf("used line %q, want 7", line)
		}
	}
	// Off: a no-op.
	var off *Telemetry
	if err := off.ObserveMemory(nil); err != nil {
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

func TestBudgetMetrics(t *testing.T) {
	tel, err := New(context.Background(), Config{MetricsListen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if err := tel.ObserveProducerStates(func() (int64, int64) { return 12, 250000 }); err != nil {
		t.Fatal(err)
	}
	got := scrapeLines(t, tel, "regent_producer_states")
	for _, want := range []string{"regent_producer_states{", "} 12", "regent_producer_states_limit{", "} 250000"} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got)
		}
	}
	if err := tel.ObserveTransactionalIDs(func() (int64, int64) { return 7, 100000 }); err != nil {
		t.Fatal(err)
	}
	got = scrapeLines(t, tel, "regent_transactional_ids")
	for _, want := range []string{"regent_transactional_ids{", "} 7", "regent_transactional_ids_limit{", "} 100000"} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got)
		}
	}
	if err := tel.ObserveGroups(func() (int64, int64) { return 3, 100000 }); err != nil {
		t.Fatal(err)
	}
	got = scrapeLines(t, tel, "regent_groups")
	for _, want := range []string{"regent_groups{", "} 3", "regent_groups_limit{"} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got)
		}
	}
	if err := tel.ObservePartitions(func() (int64, int64) { return 5, 50000 }); err != nil {
		t.Fatal(err)
	}
	got = scrapeLines(t, tel, "regent_partitions")
	for _, want := range []string{"regent_partitions{", "} 5", "regent_partitions_limit{", "} 50000"} {
		if !strings.Contains(got, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, got)
		}
	}
	var off *Telemetry
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
