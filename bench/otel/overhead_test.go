// Package otelbench measures what request tracing costs produce throughput:
// the same regent binary with tracing off, with metrics only, and tracing
// sampled at 1% and 100% (spans exported over OTLP/HTTP to an in-process
// receiver that discards them), optionally against a baseline binary built
// without telemetry. Run it with bench/otel/run.sh, or:
//
//	REGENT_OTEL_BENCH=1 go test -v -run TestProduceOverhead ./bench/otel
//
// Two workloads: a batched flood (few large requests) and one record per
// request (8 producers, sync: the per-request cost shows). Each reports
// wall-clock throughput and the broker's CPU time per record (read from
// /proc, so less disturbed by other load on a shared machine).
//
// Knobs (environment): REGENT_OTEL_BENCH_RECORDS (batched records per
// round, default 1000000), REGENT_OTEL_BENCH_REQUESTS (sync produces per
// round, default 40000), REGENT_OTEL_BENCH_ROUNDS (default 7),
// REGENT_OTEL_BENCH_VALUE (record bytes, default 100),
// REGENT_OTEL_BENCH_BASELINE (path of a regent binary to compare "off"
// against, e.g. one built from a commit before the telemetry hooks).
package otelbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// discardSink is an OTLP/HTTP receiver that reads and drops every export.
type discardSink struct {
	exports, bytes atomic.Int64
}

// quiesce waits until no export has arrived for 400 ms (at most 30 s), so
// the exports of one run do not load the machine during the next.
func (d *discardSink) quiesce() {
	deadline := time.Now().Add(30 * time.Second)
	last, since := d.exports.Load(), time.Now()
	for time.Since(since) < 400*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if n := d.exports.Load(); n != last {
			last, since = n, time.Now()
		}
	}
}

func (d *discardSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	d.exports.Add(1)
	d.bytes.Add(n)
	// An empty ExportTraceServiceResponse encodes as zero bytes.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// broker is one regent child process.
type broker struct {
	name string
	addr string
	cmd  *exec.Cmd
	log  bytes.Buffer
}

func startBroker(t *testing.T, name, bin string, args ...string) *broker {
	t.Helper()
	b := &broker{name: name, addr: fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))}
	b.cmd = exec.Command(bin, append([]string{"--listen", b.addr, "--data", t.TempDir(), "--log-level", "warn"}, args...)...)
	b.cmd.Stdout, b.cmd.Stderr = &b.log, &b.log
	// Export promptly: spans a sampled run buffered must not be exported
	// while the next mode is being measured (see quiesce).
	b.cmd.Env = append(os.Environ(), "OTEL_BSP_SCHEDULE_DELAY=100")
	if err := brokertest.StartProcess(b.cmd); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		_ = b.cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen: %s", name, b.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createTopic makes a fresh topic.
func createTopic(t *testing.T, addr, topic string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
}

// cpuNanos is the CPU time the process has used so far, summed over its
// threads (/proc/PID/task/*/schedstat, nanoseconds): unlike wall-clock
// throughput it is barely moved by other load on a shared machine.
func (b *broker) cpuNanos(t *testing.T) int64 {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", b.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var total int64
	for _, task := range tasks {
		raw, err := os.ReadFile(dir + "/" + task.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		if f := strings.Fields(string(raw)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return total
}

// result is one round's outcome.
type result struct {
	rate      float64 // records per second
	cpuPerRec float64 // broker CPU nanoseconds per record
}

// produceBatched floods one producer with n records of size bytes (the
// client batches them: few, large requests).
func produceBatched(t *testing.T, b *broker, topic string, n, size, partitions int) result {
	t.Helper()
	createTopic(t, b.addr, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := bytes.Repeat([]byte("x"), size)
	var failed atomic.Int64
	var firstErr atomic.Value
	cpu0 := b.cpuNanos(t)
	start := time.Now()
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	cpu := b.cpuNanos(t) - cpu0
	if failed.Load() > 0 {
		t.Fatalf("%d records failed: %v", failed.Load(), firstErr.Load())
	}
	return result{rate: float64(n) / took.Seconds(), cpuPerRec: float64(cpu) / float64(n)}
}

// produceSync runs clients producers, each producing its share of n
// records one at a time and waiting for each (one record per request: the
// per-request cost shows).
func produceSync(t *testing.T, b *broker, topic string, n, size, partitions, clients int) result {
	t.Helper()
	createTopic(t, b.addr, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := bytes.Repeat([]byte("y"), size)
	cls := make([]*kgo.Client, clients)
	for i := range cls {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// Connect and learn the metadata before the clock starts.
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cls[i] = cl
	}
	errc := make(chan error, clients)
	cpu0 := b.cpuNanos(t)
	start := time.Now()
	for _, cl := range cls {
		go func() {
			for j := 0; j < n/clients; j++ {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range cls {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	cpu := b.cpuNanos(t) - cpu0
	total := n / clients * clients
	return result{rate: float64(total) / took.Seconds(), cpuPerRec: float64(cpu) / float64(total)}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianCI is the median of xs with a 90% bootstrap confidence interval
// for it (fixed seed: the same rounds give the same interval). It says
// whether a bound holds beyond round-to-round noise.
func medianCI(xs []float64) (med, lo, hi float64) {
	med = median(xs)
	if len(xs) < 3 {
		return med, med, med
	}
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, 2000)
	sample := make([]float64, len(xs))
	for i := range meds {
		for j := range sample {
			sample[j] = xs[rng.IntN(len(xs))]
		}
		meds[i] = median(sample)
	}
	sort.Float64s(meds)
	return med, meds[len(meds)*5/100], meds[len(meds)*95/100]
}

func TestProduceOverhead(t *testing.T) {
	if os.Getenv("REGENT_OTEL_BENCH") == "" {
		t.Skip("benchmark: set REGENT_OTEL_BENCH=1 (or run bench/otel/run.sh)")
	}
	records := envInt("REGENT_OTEL_BENCH_RECORDS", 1_000_000)
	requests := envInt("REGENT_OTEL_BENCH_REQUESTS", 40_000)
	rounds := envInt("REGENT_OTEL_BENCH_ROUNDS", 7)
	size := envInt("REGENT_OTEL_BENCH_VALUE", 100)
	const partitions, clients = 4, 8
	type workload struct {
		name string
		run  func(b *broker, topic string) result
	}
	workloads := []workload{
		{fmt.Sprintf("batched: %d records of %d B, one producer, %d partitions", records, size, partitions),
			func(b *broker, topic string) result { return produceBatched(t, b, topic, records, size, partitions) }},
		{fmt.Sprintf("one record per request: %d sync produces of %d B, %d producers", requests, size, clients),
			func(b *broker, topic string) result {
				return produceSync(t, b, topic, requests, size, partitions, clients)
			}},
	}

	sink := &discardSink{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: sink}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	endpoint := ln.Addr().String()

	bin := brokertest.Binary(t)
	var brokers []*broker
	if base := os.Getenv("REGENT_OTEL_BENCH_BASELINE"); base != "" {
		brokers = append(brokers, startBroker(t, "baseline", base))
	}
	brokers = append(brokers,
		startBroker(t, "off", bin),
		startBroker(t, "metrics", bin, "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))),
		startBroker(t, "sample-1%", bin, "--otel-exporter", "otlp-http", "--otel-endpoint", endpoint, "--otel-sample-ratio", "0.01"),
		startBroker(t, "sample-100%", bin, "--otel-exporter", "otlp-http", "--otel-endpoint", endpoint, "--otel-sample-ratio", "1"),
	)

	var out strings.Builder
	fmt.Fprintf(&out, "produce, medians of %d rounds; overhead: median over rounds of (off - mode) / off for\n", rounds)
	fmt.Fprintf(&out, "throughput, (mode - off) / off for the broker's CPU time per record.\n")
	for wi, w := range workloads {
		// Warm every broker up, then run the rounds with the modes
		// rotated so that drift on a shared machine spreads over all.
		for _, b := range brokers {
			w.run(b, fmt.Sprintf("w%d-warmup", wi))
		}
		rates, cpus := map[string][]float64{}, map[string][]float64{}
		for r := 0; r < rounds; r++ {
			for i := range brokers {
				b := brokers[(i+r)%len(brokers)]
				res := w.run(b, fmt.Sprintf("w%d-round-%d", wi, r))
				sink.quiesce()
				rates[b.name] = append(rates[b.name], res.rate)
				cpus[b.name] = append(cpus[b.name], res.cpuPerRec)
			}
		}
		// Overheads are medians of per-round ratios: a round's modes
		// run back to back, so slow drift of the machine cancels out.
		ratios := func(name, ref string, vals map[string][]float64, lowerIsBetter bool) []float64 {
			var rs []float64
			for i := range vals[name] {
				if lowerIsBetter {
					rs = append(rs, (vals[name][i]-vals[ref][i])/vals[ref][i]*100)
				} else {
					rs = append(rs, (vals[ref][i]-vals[name][i])/vals[ref][i]*100)
				}
			}
			return rs
		}
		ratio := func(name, ref string, vals map[string][]float64, lowerIsBetter bool) float64 {
			return median(ratios(name, ref, vals, lowerIsBetter))
		}
		fmt.Fprintf(&out, "%s\n", w.name)
		for _, b := range brokers {
			var rs []string
			for _, x := range cpus[b.name] {
				rs = append(rs, fmt.Sprintf("%.0f", x))
			}
			_, tlo, thi := medianCI(ratios(b.name, "off", rates, false))
			_, clo, chi := medianCI(ratios(b.name, "off", cpus, true))
			fmt.Fprintf(&out, "  %-12s %9.0f rec/s (overhead %+6.2f%%, 90%% CI [%+.2f, %+.2f])  %7.0f ns CPU/rec (overhead %+6.2f%%, 90%% CI [%+.2f, %+.2f])  CPU/rec by round [%s]\n",
				b.name, median(rates[b.name]), ratio(b.name, "off", rates, false), tlo, thi, median(cpus[b.name]), ratio(b.name, "off", cpus, true), clo, chi, strings.Join(rs, " "))
		}
		if _, ok := rates["baseline"]; ok {
			_, tlo, thi := medianCI(ratios("off", "baseline", rates, false))
			_, clo, chi := medianCI(ratios("off", "baseline", cpus, true))
			fmt.Fprintf(&out, "  off vs baseline (no hooks): throughput overhead %+.2f%% (90%% CI [%+.2f, %+.2f]), CPU/rec overhead %+.2f%% (90%% CI [%+.2f, %+.2f])\n",
				ratio("off", "baseline", rates, false), tlo, thi, ratio("off", "baseline", cpus, true), clo, chi)
		}
	}
	fmt.Fprintf(&out, "OTLP receiver: %d exports, %d bytes\n", sink.exports.Load(), sink.bytes.Load())
	t.Log("\n" + out.String())
}
