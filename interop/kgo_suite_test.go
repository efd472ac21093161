package interop_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
)

// kgoSkip names the kgo integration tests not run: share groups (KIP-932, not served), SASL (not configured here),
// and two regex tests that expect an internal __consumer_offsets topic in
// Metadata (Regent keeps group state outside the topic space).
const kgoSkip = `Share|SCRAM|OAuth|TestConsumeRegex|Test848RegexBrokerResolves`

// TestKgoConformanceSuite runs franz-go's own kgo integration tests against
// a fresh Regent and reports pass and fail counts; every test outside the
// skipped families must pass.
func TestKgoConformanceSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("kgo suite: not in -short")
	}
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	runKgoSuite(t, "Regent", b.Addr, 1)
}

// TestKgoConformanceSuiteCluster runs the same suite against a 3-node
// raft cluster, with every topic replicated to the three voters.
func TestKgoConformanceSuiteCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("kgo suite: not in -short")
	}
	c := brokertest.StartCluster(t, 3, "--broker-config", "group.initial.rebalance.delay.ms=0")
	c.WaitLeader(t, time.Minute)
	runKgoSuite(t, "a 3-node Regent cluster", strings.Join(c.Seeds(), ","), 3)
}

// runKgoSuite runs franz-go's kgo integration tests against seeds.
func runKgoSuite(t *testing.T, what, seeds string, rf int) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-json", "-count=1", "-timeout=14m",
		"-skip", kgoSkip, "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+seeds, fmt.Sprintf("KGO_TEST_RF=%d", rf), "KGO_TEST_RECORDS=50000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	passed, failed, skipped := map[string]bool{}, map[string]bool{}, map[string]bool{}
	outputs := map[string]*strings.Builder{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass":
			passed[ev.Test] = true
		case "fail":
			failed[ev.Test] = true
		case "skip":
			skipped[ev.Test] = true
		case "output":
			if outputs[ev.Test] == nil {
				outputs[ev.Test] = &strings.Builder{}
			}
			if outputs[ev.Test].Len() < 4000 {
				outputs[ev.Test].WriteString(ev.Output)
			}
		}
	}
	names := func(m map[string]bool) []string {
		var s []string
		for k := range m {
			s = append(s, k)
		}
		sort.Strings(s)
		return s
	}
	t.Logf("kgo integration suite against %s: %d passed, %d failed, %d skipped by the suite; families not run yet: %s",
		what, len(passed), len(failed), len(skipped), regexp.MustCompile(`\|`).ReplaceAllString(kgoSkip, ", "))
	t.Logf("passed: %s", strings.Join(names(passed), " "))
	for _, n := range names(failed) {
		t.Errorf("kgo %s failed:\n%s", n, outputs[n])
	}
	if err != nil && len(failed) == 0 {
		t.Fatalf("kgo suite: %v\n%s", err, stderr.String())
	}
}
