package interop_test

// Older Java clients, which Kafka 4 itself no longer serves (KIP-896), against
// Regent: SPEC §1 keeps every API from the lowest version Kafka 3.9 served.
// The scenario is interop/java/legacy's LegacyClients, compiled against
// kafka-clients 2.0.1 and run with that jar and with 2.8.2's in its place.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/interop/brokertest"
)

// legacyClasspath is the legacy module's classes and runtime jars, with
// kafka-clients at version (the module's own 2.0.1, or a jar copied into
// target/lib-<version> by its POM).
func legacyClasspath(t *testing.T, version string) string {
	t.Helper()
	target := filepath.Join(frameworkScenarios(t), "legacy", "target")
	client := filepath.Join(target, "lib-"+version, "kafka-clients-"+version+".jar")
	if version == "2.0.1" {
		client = filepath.Join(target, "lib", "kafka-clients-2.0.1.jar")
	}
	if _, err := os.Stat(client); err != nil {
		t.Fatalf("kafka-clients %s: %v (interop/java/build.sh builds interop/java/legacy)", version, err)
	}
	cp := []string{filepath.Join(target, "classes"), client}
	jars, err := filepath.Glob(filepath.Join(target, "lib", "*.jar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jars {
		if !strings.HasPrefix(filepath.Base(j), "kafka-clients-") {
			cp = append(cp, j)
		}
	}
	return strings.Join(cp, string(os.PathListSeparator))
}

// TestLegacyJavaClients: kafka-clients 2.0.1 and 2.8.2 create topics,
// produce idempotently and plainly with compression and headers, consume in
// a group that commits and resumes, run transactions read with both
// isolation levels, and copy a topic with sendOffsetsToTransaction.
func TestLegacyJavaClients(t *testing.T) {
	frameworkScenarios(t)
	for _, version := range []string{"2.0.1", "2.8.2"} {
		t.Run(version, func(t *testing.T) {
			cp := legacyClasspath(t, version)
			b := startFrameworkBroker(t)
			runJavaMain(t, cp, []string{"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}, "LegacyClients", b.Addr, 3*time.Minute)
		})
	}
}

// TestClusterLegacyJavaClients is the 2.0.1 scenario against a 3-node
// cluster, bootstrapped from every node.
func TestClusterLegacyJavaClients(t *testing.T) {
	frameworkScenarios(t)
	cp := legacyClasspath(t, "2.0.1")
	c := brokertest.StartCluster(t, 3, "--broker-config", "group.initial.rebalance.delay.ms=0")
	c.WaitLeader(t, time.Minute)
	runJavaMain(t, cp, []string{"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}, "LegacyClients", strings.Join(c.Seeds(), ","), 3*time.Minute)
}
