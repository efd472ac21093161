package interop_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

// perfResult is what Kafka's ProducerPerformance reports at its end.
type perfResult struct {
	records     int
	mbPerSec    float64
	throttleMax float64 // producer-metrics:produce-throttle-time-max
	throttleAvg float64
	out         string
}

var (
	perfSummary  = regexp.MustCompile(`(\d+) records sent, [\d.]+ records/sec \(([\d.]+) MB/sec\)`)
	perfThrottle = regexp.MustCompile(`producer-metrics:produce-throttle-time-(max|avg):\{client-id=[^}]*\}\s*:\s*([\d.NaE-]+)`)
)

func parsePerf(t *testing.T, out string) perfResult {
	t.Helper()
	r := perfResult{out: out, throttleMax: -1, throttleAvg: -1}
	m := perfSummary.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		t.Fatalf("no ProducerPerformance summary in:\n%s", lastLines(out, 30))
	}
	last := m[len(m)-1]
	r.records, _ = strconv.Atoi(last[1])
	r.mbPerSec, _ = strconv.ParseFloat(last[2], 64)
	for _, tm := range perfThrottle.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(tm[2], 64)
		if err != nil {
			continue
		}
		if tm[1] == "max" {
			r.throttleMax = v
		} else {
			r.throttleAvg = v
		}
	}
	if r.throttleMax < 0 {
		t.Fatalf("no produce-throttle-time-max metric in:\n%s", lastLines(out, 60))
	}
	return r
}

// TestKafkaConfigsProducerQuota: kafka-configs sets client and user
// quotas (AlterClientQuotas) and describes them back; a producer quota of
// 1 MiB/s holds Kafka's ProducerPerformance to what Kafka's math lets
// through, and the run reports a produce throttle time, while a producer
// with another client id beside it runs unthrottled and clearly faster.
//
// What Kafka's math (11 windows of 1 s, at least 10 measured) lets a
// greedy producer through is not a steady 1 MiB/s: a fresh client may
// send 10-11 windows' worth at once, is then held almost silent, and
// bursts again each time its oldest full window ages out, 11 s later. So
// the run's bytes stay within the quota times (its time + 11 s) and reach
// at least the quota times (its time - 11 s); the broker's windowed rate
// (scraped from /metrics) stays near the quota: above it by at most a
// tenth (the measured span is 10 s plus the current window's fraction)
// and the requests in flight when it was reached.
func TestKafkaConfigsProducerQuota(t *testing.T) {
	lib := kafkaLib(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	b := brokertest.Start(t, "--metrics-listen", metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const configs = "kafka.admin.ConfigCommand"

	// Each run of a Java tool takes seconds: six cover the forms (a
	// client, a user, an ip; their defaults are in TestClientQuotasAPI).
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "clients", "--entity-name", "perf-limited", "--add-config", "producer_byte_rate=1048576")
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=2048,producer_byte_rate=4096,request_percentage=150")
	out := kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "clients", "--entity-name", "perf-limited")
	if !strings.Contains(out, "producer_byte_rate=1048576") {
		t.Fatalf("kafka-configs --describe clients perf-limited:\n%s", out)
	}
	out = kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default")
	if !strings.Contains(out, "consumer_byte_rate=2048") || !strings.Contains(out, "producer_byte_rate=4096") || !strings.Contains(out, "request_percentage=150") {
		t.Fatalf("kafka-configs --describe users alice, default client:\n%s", out)
	}
	t.Logf("kafka-configs --describe: %s", strings.TrimSpace(out))
	// An ip entity (connection_creation_rate), for an address the test
	// does not connect from.
	kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.9", "--add-config", "connection_creation_rate=100")
	if out := kafkaTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "ips", "--entity-name", "127.0.0.9"); !strings.Contains(out, "connection_creation_rate=100") {
		t.Fatalf("kafka-configs --describe ips 127.0.0.9:\n%s", out)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "quota-perf"); err != nil {
		t.Fatal(err)
	}

	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	perf := func(clientID string, records int) *exec.Cmd {
		return exec.CommandContext(ctx, "java", "-Xmx256m", "-cp", filepath.Join(lib, "*"), "-Dlog4j2.configurationFile="+log4j,
			"org.apache.kafka.tools.ProducerPerformance", "--topic", "quota-perf", "--num-records", strconv.Itoa(records), "--throughput", "-1",
			"--record-size", "1024", "--print-metrics", "--producer-props", "bootstrap.servers="+b.Addr, "client.id="+clientID, "acks=1", "linger.ms=5")
	}
	type result struct {
		out []byte
		err error
	}
	run := func(cmd *exec.Cmd) <-chan result {
		ch := make(chan result, 1)
		go func() {
			out, err := cmd.CombinedOutput()
			ch <- result{out, err}
		}()
		return ch
	}
	// The broker's windowed rate for perf-limited, scraped while it runs.
	scrapeDone := make(chan struct{})
	var maxRate float64
	var scrapes int
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		re := regexp.MustCompile(`regent_quota_rate\{client_id="perf-limited",[^}]*quota="producer_byte_rate"[^}]*\} ([0-9.e+]+)`)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-scrapeDone:
				return
			case <-tick.C:
			}
			resp, err := http.Get("http://" + metrics + "/metrics")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := re.FindSubmatch(body); m != nil {
				v, _ := strconv.ParseFloat(string(m[1]), 64)
				maxRate = max(maxRate, v)
				scrapes++
			}
		}
	}()
	started := time.Now()
	limitedCh := run(perf("perf-limited", 16384)) // 16 MiB of records
	freeCh := run(perf("perf-free", 40960))       // 40 MiB
	lr, fr := <-limitedCh, <-freeCh
	close(scrapeDone)
	<-scraped
	if lr.err != nil || fr.err != nil {
		t.Fatalf("ProducerPerformance: limited %v, free %v\n%s\n%s", lr.err, fr.err, lastLines(string(lr.out), 20), lastLines(string(fr.out), 20))
	}
	limited, free := parsePerf(t, string(lr.out)), parsePerf(t, string(fr.out))
	const quota = 1.0                                             // MiB/s
	elapsed := float64(limited.records) / 1024 / limited.mbPerSec // s
	t.Logf("limited: %d records in %.1f s, %.2f MB/s, produce throttle max %.0f ms avg %.1f ms; broker's windowed rate at most %.0f B/s over %d scrapes; free: %d records, %.2f MB/s, throttle max %.0f ms (both done in %v)",
		limited.records, elapsed, limited.mbPerSec, limited.throttleMax, limited.throttleAvg, maxRate, scrapes, free.records, free.mbPerSec, free.throttleMax, time.Since(started).Round(time.Millisecond))
	if scrapes == 0 || maxRate > 1.2*1048576 {
		t.Errorf("the broker measured perf-limited at up to %.0f B/s (%d scrapes), want at most 1.2 x 1048576", maxRate, scrapes)
	}
	sent := float64(limited.records) / 1024 // MiB
	if lo, hi := quota*(elapsed-11)*0.9, quota*(elapsed+11)*1.05; sent < lo || sent > hi {
		t.Errorf("the limited producer sent %.1f MiB in %.1f s, want %.1f to %.1f (the quota over the run less or plus 11 windows)", sent, elapsed, lo, hi)
	}
	if limited.throttleMax <= 0 {
		t.Errorf("the limited producer reports no throttle time (max %v)", limited.throttleMax)
	}
	if free.throttleMax != 0 {
		t.Errorf("the free producer was throttled (max %v ms)", free.throttleMax)
	}
	if free.mbPerSec < 2*quota {
		t.Errorf("the free producer ran at %.2f MB/s, not clearly above the quota", free.mbPerSec)
	}
}

// TestKafkaTopicsUnderMutationQuota: kafka-configs sets a
// controller_mutation_rate of 5 partitions/s (a burst of 55); a client
// with that client id creates 85 partitions at once, taking its bucket to
// -30, which refills to zero in 6 s. kafka-topics --create with the same
// client id, started at once, reports Kafka's ThrottlingQuotaExceeded
// exception with Regent's message (the tool does not retry a quota
// violation, against Kafka either); the same creation succeeds once the
// bucket allows, the refused requests' throttle muting the connection in
// between, and the broker's quota metrics show the throttle it gave.
func TestKafkaTopicsUnderMutationQuota(t *testing.T) {
	lib := kafkaLib(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
	b := brokertest.Start(t, "--metrics-listen", metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kafkaTool(t, ctx, lib, "kafka.admin.ConfigCommand", "--bootstrap-server", b.Addr, "--alter", "--entity-type", "clients", "--entity-name", "java-admin", "--add-config", "controller_mutation_rate=5")

	deadline := time.Now().Add(time.Minute)
	admin := dialRaw(t, b.Addr, "java-admin")
	resp, _, err := admin.send(createTopicsRequest(6, "mq-first", 85), deadline)
	if err != nil {
		t.Fatal(err)
	}
	if cr := resp.(*kmsg.CreateTopicsResponse); cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("first 85 partitions: %+v", cr.Topics)
	}
	conf := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(conf, []byte("client.id=java-admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := kafkaToolFails(t, ctx, lib, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b.Addr, "--command-config", conf, "--create", "--topic", "mq-second", "--partitions", "3")
	if !strings.Contains(out, "ThrottlingQuotaExceededException") || !strings.Contains(out, "controller_mutation_rate quota exceeded") {
		t.Fatalf("kafka-topics --create over the quota:\n%s", out)
	}
	refused := 0
	for {
		resp, _, err := admin.send(createTopicsRequest(6, "mq-second", 3), deadline)
		if err != nil {
			t.Fatal(err)
		}
		code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
		if code == 0 {
			break
		}
		if code != kerr.ThrottlingQuotaExceeded.Code || refused > 20 {
			t.Fatalf("creating mq-second: code %d after %d refusals", code, refused)
		}
		refused++
	}
	body := scrape(t, metrics)
	m := regexp.MustCompile(`regent_quota_throttle_time_milliseconds_total\{client_id="java-admin",[^}]*quota="controller_mutation_rate"[^}]*\} ([0-9.e+]+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no controller_mutation_rate throttle metric for java-admin")
	}
	if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
		t.Fatalf("throttle metric %s", m[1])
	}
	said := regexp.MustCompile(`Error while executing topic command : [^\n]*`).FindString(out)
	t.Logf("kafka-topics: %q; created after %d more refusals; %s ms of throttle given", said, refused, m[1])
}

// scrape reads the broker's Prometheus endpoint.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
