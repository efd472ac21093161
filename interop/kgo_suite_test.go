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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// kgoSkip names the kgo integration tests not run while the broker does
// not advertise share groups (KIP-932: ShareFetch and ShareAcknowledge v2);
// once it does, runKgoSuite runs them with no -skip. The SASL tests run
// against a SASL_PLAINTEXT listener: SCRAM with a user made first
// (kgoSCRAMEnv), OAuth with the unsecured
// "alg":"none" tokens Kafka's default validator accepts, which Regent
// takes only with --sasl-oauthbearer-unsecured (kgoSASLArgs).
const kgoSkip = `Share`

// TestKgoConformanceSuite runs franz-go's own kgo integration tests against
// a fresh Regent and reports pass and fail counts; every test outside the
// skipped families must pass.
func TestKgoConformanceSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("kgo suite: not in -short")
	}
	plainAddr, saslAddr := loopback(t), loopback(t)
	brokertest.StartAt(t, plainAddr, append(kgoSASLArgs(plainAddr, saslAddr), "--broker-config", "group.initial.rebalance.delay.ms=0")...)
	runKgoSuite(t, "Regent", plainAddr, 1, "", kgoSASLEnv(t, plainAddr, saslAddr)...)
}

// TestKgoSuiteSASL runs only the kgo suite's SASL tests against a
// SASL_PLAINTEXT listener: TestSCRAMAuth logs in with SCRAM-SHA-512 and
// pings, TestSCRAMAuthBadCredentials must be refused, TestOAuthAuth logs
// in with an unsecured token and must be refused (invalid_token) once the
// token has expired. The quick form of the full suite's SASL part.
func TestKgoSuiteSASL(t *testing.T) {
	plainAddr, saslAddr := loopback(t), loopback(t)
	brokertest.StartAt(t, plainAddr, kgoSASLArgs(plainAddr, saslAddr)...)
	passed := runKgoSuite(t, "Regent's SASL_PLAINTEXT listener", plainAddr, 1, "SCRAM|OAuth", kgoSASLEnv(t, plainAddr, saslAddr)...)
	for _, name := range []string{"TestSCRAMAuth", "TestSCRAMAuthBadCredentials", "TestOAuthAuth"} {
		if !passed[name] {
			t.Errorf("kgo %s did not pass (skipped or not run)", name)
		}
	}
}

// kgoSASLArgs are the broker flags for the suite's SASL tests: a PLAINTEXT
// and a SASL_PLAINTEXT listener, SCRAM and OAUTHBEARER on the latter, and
// unverified OAUTHBEARER tokens (the suite's are unsecured JWS).
func kgoSASLArgs(plainAddr, saslAddr string) []string {
	return []string{
		"--listeners", "PLAINTEXT://" + plainAddr + ",SASL_PLAINTEXT://" + saslAddr,
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		"--sasl-oauthbearer-unsecured",
	}
}

// kgoSASLEnv is the suite's variables for its SASL tests on saslAddr.
func kgoSASLEnv(t *testing.T, plainAddr, saslAddr string) []string {
	return append(kgoSCRAMEnv(t, plainAddr, saslAddr), "KGO_TEST_OAUTH_SEEDS="+saslAddr)
}

// kgoSCRAMEnv creates a SCRAM-SHA-512 user through the PLAINTEXT listener
// and returns the suite's variables for logging in as it on saslAddr.
func kgoSCRAMEnv(t *testing.T, plainAddr, saslAddr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(plainAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kgo", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "kgo-pass"}})
	if err == nil {
		err = res["kgo"].Err
	}
	if err != nil {
		t.Fatalf("create the kgo SCRAM user: %v", err)
	}
	return []string{"KGO_TEST_SCRAM=kgo:kgo-pass:512", "KGO_TEST_SCRAM_SEEDS=" + saslAddr}
}

// TestKgoConformanceSuiteCluster runs the same suite against a 3-node
// raft cluster, with every topic replicated to the three voters. Every
// node has a SASL_PLAINTEXT listener too, so the SCRAM tests log in as a
// user created through one node and replicated to all, and the OAuth test
// runs there as well.
func TestKgoConformanceSuiteCluster(t *testing.T) { kgoSuiteCluster(t, "a 3-node Regent cluster") }

// TestKgoConformanceSuiteClusterGroups is the suite against a 3-node
// cluster running partition raft groups (--raft-groups): partitions are
// led by all three nodes, transactions span them.
func TestKgoConformanceSuiteClusterGroups(t *testing.T) {
	kgoSuiteCluster(t, "a 3-node Regent cluster with partition raft groups", groupsArgs...)
}

func kgoSuiteCluster(t *testing.T, what string, extra ...string) {
	if testing.Short() {
		t.Skip("kgo suite: not in -short")
	}
	c := brokertest.StartClusterListeners(t, 3, []string{"SASL_PLAINTEXT"}, append([]string{"--broker-config", "group.initial.rebalance.delay.ms=0",
		"--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER", "--sasl-oauthbearer-unsecured"}, extra...)...)
	c.WaitLeader(t, time.Minute)
	runKgoSuite(t, what, strings.Join(c.Seeds(), ","), 3, "",
		kgoClusterSASLEnv(t, c)...)
}

// kgoClusterSASLEnv creates the SCRAM user through the first node and
// waits until every node's SASL_PLAINTEXT listener takes its login (the
// user reaches the followers through the raft log), then returns the
// suite's SASL variables naming every node's SASL_PLAINTEXT listener.
func kgoClusterSASLEnv(t *testing.T, c *brokertest.Cluster) []string {
	t.Helper()
	seeds := c.ListenerSeeds("SASL_PLAINTEXT")
	env := kgoSCRAMEnv(t, c.Seeds()[0], strings.Join(seeds, ","))
	for _, addr := range seeds {
		testwait.For(t, "the kgo SCRAM user logs in at "+addr, 30*time.Second, func() bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
				kgo.SASL(scram.Auth{User: "kgo", Pass: "kgo-pass"}.AsSha512Mechanism()))
			if err != nil {
				return false
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return cl.Ping(ctx) == nil
		})
	}
	return append(env, "KGO_TEST_OAUTH_SEEDS="+strings.Join(seeds, ","))
}

// runKgoSuite runs franz-go's kgo integration tests against seeds (only
// those matching run, when set), with env added to the suite's, and
// returns the tests that passed.
func runKgoSuite(t *testing.T, what, seeds string, rf int, run string, env ...string) map[string]bool {
	return runKgoSuiteProbed(t, what, seeds, strings.Split(seeds, ",")[0], rf, run, env...)
}

// runKgoSuiteProbed is runKgoSuite asking probe, a plaintext listener of
// the same broker, whether share groups are advertised: the probe's client
// speaks neither TLS nor SASL, so it cannot ask an SSL seed.
func runKgoSuiteProbed(t *testing.T, what, seeds, probe string, rf int, run string, env ...string) map[string]bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	args := []string{"test", "-json", "-count=1", "-timeout=14m"}
	skip := ""
	shareOn, why := shareAdvertised(t, probe)
	if !shareOn {
		skip = kgoSkip
		args = append(args, "-skip", skip)
		t.Logf("kgo share tests not run: %s", why)
	}
	if run == "" {
		// REGENT_KGO_RUN narrows every suite run, to chase one test.
		run = os.Getenv("REGENT_KGO_RUN")
	}
	if run != "" {
		args = append(args, "-run", run)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/twmb/franz-go/pkg/kgo")...)
	cmd.Env = append(append(os.Environ(), "KGO_SEEDS="+seeds, fmt.Sprintf("KGO_TEST_RF=%d", rf), "KGO_TEST_RECORDS=50000"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	passed, failed, skipped := map[string]bool{}, map[string]bool{}, map[string]bool{}
	outputs := map[string]*strings.Builder{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
			continue
		}
		if top, _, sub := strings.Cut(ev.Test, "/"); sub {
			// A subtest's output explains its parent's failure; its
			// verdict is counted with the parent's.
			if ev.Action == "output" {
				if outputs[top] == nil {
					outputs[top] = &strings.Builder{}
				}
				outputs[top].WriteString(ev.Output)
			}
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
			outputs[ev.Test].WriteString(ev.Output)
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
	notRun := "none"
	if skip != "" {
		notRun = regexp.MustCompile(`\|`).ReplaceAllString(skip, ", ")
	}
	t.Logf("kgo integration suite against %s: %d passed, %d failed, %d skipped by the suite; families not run: %s",
		what, len(passed), len(failed), len(skipped), notRun)
	if shareOn {
		// The share tests decide for themselves whether the broker serves
		// share groups; one skipping here means kgo saw otherwise.
		var sp, sf, ss []string
		for _, m := range []struct {
			set map[string]bool
			out *[]string
		}{{passed, &sp}, {failed, &sf}, {skipped, &ss}} {
			for _, n := range names(m.set) {
				if strings.Contains(n, "Share") {
					*m.out = append(*m.out, n)
				}
			}
		}
		t.Logf("kgo share tests: %d passed (%s), %d failed (%s), %d skipped (%s)",
			len(sp), strings.Join(sp, " "), len(sf), strings.Join(sf, " "), len(ss), strings.Join(ss, " "))
		if len(ss) > 0 && run == "" {
			t.Errorf("kgo skipped share tests the broker advertises: %s", strings.Join(ss, " "))
		}
	}
	t.Logf("passed: %s", strings.Join(names(passed), " "))
	for _, n := range names(failed) {
		t.Errorf("kgo %s failed:\n%s", n, headTail(outputs[n].String(), 4000, 12000))
	}
	if len(failed) > 0 {
		// The whole output, for what the head and tail above leave out.
		if f, ferr := os.CreateTemp("", "regent-kgo-suite-*.json"); ferr == nil {
			_, _ = f.Write(out)
			_ = f.Close()
			t.Logf("the suite's whole go test -json output: %s", f.Name())
		}
	}
	if err != nil && len(failed) == 0 {
		t.Fatalf("kgo suite: %v\n%s", err, stderr.String())
	}
	return passed
}

// headTail is s, or its first head and last tail bytes when longer: a
// failed kgo test's own message comes last, after its log lines.
func headTail(s string, head, tail int) string {
	if len(s) <= head+tail {
		return s
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes left out ...]\n", len(s)-head-tail) + s[len(s)-tail:]
}
