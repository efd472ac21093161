package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/regent-broker/regent/interop/brokertest"
)

// requestLog4j makes Kafka's NetworkClient log every request it sends
// ("apiKey=X, apiVersion=N") on stderr, so a test can tell which version
// a tool negotiated; everything else is quiet.
const requestLog4j = `rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %p %c{1} %m%n
logger.nc.name = org.apache.kafka.clients.NetworkClient
logger.nc.level = DEBUG
`

// toolRun is one run of a Kafka tool: what it printed, and the requests
// its clients sent.
type toolRun struct {
	stdout, stderr string
}

// versions lists the versions of api (Kafka's enum name, OFFSET_COMMIT)
// the tool sent.
func (r toolRun) versions(api string) []string {
	re := regexp.MustCompile(`apiKey=` + api + `, apiVersion=(\d+)`)
	seen := map[string]bool{}
	var out []string
	for _, m := range re.FindAllStringSubmatch(r.stderr, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

// runTool runs a Kafka tool (or any main class on Kafka's classpath) with
// request logging, failing the test if it exits non-zero.
func runTool(t *testing.T, ctx context.Context, lib, class string, args ...string) toolRun {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "log4j2.properties")
	if err := os.WriteFile(cfg, []byte(requestLog4j), 0o644); err != nil {
		t.Fatal(err)
	}
	full := append([]string{"-Xmx256m", "-cp", filepath.Join(lib, "*"), "-Dlog4j2.configurationFile=" + cfg, class}, args...)
	cmd := exec.CommandContext(ctx, "java", full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", class, strings.Join(args, " "), err, stdout.String(), lastLines(stderr.String(), 40))
	}
	return toolRun{stdout: stdout.String(), stderr: stderr.String()}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// wantVersion fails unless the run sent api at version v (and only v).
func wantVersion(t *testing.T, what string, r toolRun, api, v string) {
	t.Helper()
	if got := r.versions(api); len(got) != 1 || got[0] != v {
		t.Fatalf("%s sent %s at versions %v, want [%s]", what, api, got, v)
	}
}

// offsetsOf parses kafka-get-offsets' "topic:partition:offset" lines.
func offsetsOf(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if i := strings.LastIndexByte(l, ':'); i > 0 {
			m[l[:i]] = l[i+1:]
		}
	}
	return m
}

// TestKafkaAdminTools runs Kafka 4.3.1's kafka-log-dirs, kafka-get-offsets,
// kafka-delete-records, a console consumer of the new group protocol
// (OffsetCommit v10, topic ids) and kafka-consumer-groups --reset-offsets
// --execute and --delete-offsets against Regent, checking what each did
// (and, from the clients' request log, the versions they used).
func TestKafkaAdminTools(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const (
		logDirs       = "org.apache.kafka.tools.LogDirsCommand"
		getOffsets    = "org.apache.kafka.tools.GetOffsetShell"
		deleteRecords = "org.apache.kafka.tools.DeleteRecordsCommand"
		consumer      = "org.apache.kafka.tools.consumer.ConsoleConsumer"
		groups        = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	)
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "adm"); err != nil {
		t.Fatal(err)
	}
	// Partition 0 gets 10 records, partition 1 five, one batch each, with
	// timestamps a second apart from base: record i at base + i s.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p, n := range []int{10, 5} {
		for i := 0; i < n; i++ {
			r := &kgo.Record{Topic: "adm", Partition: int32(p), Value: []byte(fmt.Sprint(i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// kafka-log-dirs: Regent's one data dir holding both partitions.
	run := runTool(t, ctx, lib, logDirs, "--bootstrap-server", b.Addr, "--describe", "--topic-list", "adm")
	wantVersion(t, "kafka-log-dirs", run, "DESCRIBE_LOG_DIRS", "5")
	var dirs struct {
		Brokers []struct {
			Broker  int32
			LogDirs []struct {
				LogDir     string
				Error      *string
				Partitions []struct {
					Partition string
					Size      int64
				}
			}
		}
	}
	line := run.stdout[strings.LastIndex(strings.TrimRight(run.stdout, "\n"), "\n")+1:]
	if err := json.Unmarshal([]byte(line), &dirs); err != nil {
		t.Fatalf("kafka-log-dirs output: %v\n%s", err, run.stdout)
	}
	abs, _ := filepath.Abs(b.Dir)
	if len(dirs.Brokers) != 1 || len(dirs.Brokers[0].LogDirs) != 1 || dirs.Brokers[0].LogDirs[0].LogDir != abs || dirs.Brokers[0].LogDirs[0].Error != nil {
		t.Fatalf("kafka-log-dirs: want one dir %s without error:\n%s", abs, run.stdout)
	}
	sizes := map[string]int64{}
	for _, p := range dirs.Brokers[0].LogDirs[0].Partitions {
		sizes[p.Partition] = p.Size
	}
	if len(sizes) != 2 || sizes["adm-1"] <= 0 || sizes["adm-0"] <= sizes["adm-1"] {
		t.Fatalf("kafka-log-dirs sizes %v: want adm-0 (10 batches) > adm-1 (5) > 0", sizes)
	}

	// kafka-get-offsets: latest, earliest (by name and as -1/-2), by timestamp.
	getOff := func(args ...string) map[string]string {
		t.Helper()
		run := runTool(t, ctx, lib, getOffsets, append([]string{"--bootstrap-server", b.Addr, "--topic", "adm"}, args...)...)
		return offsetsOf(run.stdout)
	}
	check := func(what string, got map[string]string, want ...string) {
		t.Helper()
		w := map[string]string{}
		for i := 0; i+1 < len(want); i += 2 {
			w[want[i]] = want[i+1]
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Fatalf("kafka-get-offsets %s: %v, want %v", what, got, w)
		}
	}
	check("--time latest", getOff("--time", "latest"), "adm:0", "10", "adm:1", "5")
	check("--time -1", getOff("--time", "-1"), "adm:0", "10", "adm:1", "5")
	check("--time earliest", getOff("--time", "earliest"), "adm:0", "0", "adm:1", "0")
	check("--time -2", getOff("--time", "-2"), "adm:0", "0", "adm:1", "0")
	// The first record at or after base + 3.5 s is record 4 in both; after
	// base + 7.5 s only partition 0 has one (partitions without are left
	// out of the tool's output).
	check("--time base+3.5s", getOff("--time", fmt.Sprint(base.Add(3500*time.Millisecond).UnixMilli())), "adm:0", "4", "adm:1", "4")
	check("--time base+7.5s", getOff("--time", fmt.Sprint(base.Add(7500*time.Millisecond).UnixMilli())), "adm:0", "8")

	// kafka-delete-records: partition 0 starts at 4 afterwards.
	spec := filepath.Join(t.TempDir(), "delete.json")
	if err := os.WriteFile(spec, []byte(`{"partitions":[{"topic":"adm","partition":0,"offset":4}],"version":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run = runTool(t, ctx, lib, deleteRecords, "--bootstrap-server", b.Addr, "--offset-json-file", spec)
	if !regexp.MustCompile(`partition: adm-0\s+low_watermark: 4`).MatchString(run.stdout) {
		t.Fatalf("kafka-delete-records:\n%s", run.stdout)
	}
	check("--time -2 after delete-records", getOff("--time", "-2"), "adm:0", "4", "adm:1", "0")
	starts, err := adm.ListStartOffsets(ctx, "adm")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("adm", 0); o.Offset != 4 {
		t.Fatalf("start offset of adm/0 after delete-records: %+v", o)
	}

	// Kafka 4.3's consumer of the new group protocol commits by topic id
	// (OffsetCommit v10) when it closes: 6 records from partition 0's start
	// (4) and all 5 of partition 1.
	run = runTool(t, ctx, lib, consumer, "--bootstrap-server", b.Addr, "--topic", "adm", "--group", "adm-g", "--from-beginning",
		"--max-messages", "11", "--command-property", "group.protocol=consumer")
	wantVersion(t, "the console consumer", run, "OFFSET_COMMIT", "10")
	committed := func() map[int32]int64 {
		t.Helper()
		fo, err := adm.FetchOffsets(ctx, "adm-g")
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]int64{}
		fo.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil {
				t.Fatalf("fetch offsets: %v", o.Err)
			}
			if o.Topic == "adm" && o.At >= 0 {
				m[o.Partition] = o.At
			}
		})
		return m
	}
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 10, 1: 5}) {
		t.Fatalf("offsets the console consumer committed by topic id: %v, want 0:10 1:5", got)
	}

	// kafka-consumer-groups on the group, now empty: --reset-offsets
	// --execute moves partition 0 to 6 (Kafka 4.3's admin client commits
	// by name, at v9), --delete-offsets removes partition 1's.
	run = runTool(t, ctx, lib, groups, "--bootstrap-server", b.Addr, "--reset-offsets", "--group", "adm-g", "--topic", "adm:0", "--to-offset", "6", "--execute")
	wantVersion(t, "kafka-consumer-groups --reset-offsets", run, "OFFSET_COMMIT", "9")
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 6, 1: 5}) {
		t.Fatalf("after --reset-offsets --to-offset 6 on adm:0: %v\n%s", got, run.stdout)
	}
	run = runTool(t, ctx, lib, groups, "--bootstrap-server", b.Addr, "--reset-offsets", "--group", "adm-g", "--topic", "adm:1", "--to-earliest", "--execute")
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 6, 1: 0}) {
		t.Fatalf("after --reset-offsets --to-earliest on adm:1: %v\n%s", got, run.stdout)
	}
	run = runTool(t, ctx, lib, groups, "--bootstrap-server", b.Addr, "--delete-offsets", "--group", "adm-g", "--topic", "adm:1")
	wantVersion(t, "kafka-consumer-groups --delete-offsets", run, "OFFSET_DELETE", "0")
	if !regexp.MustCompile(`adm\s+1\s+Successful`).MatchString(run.stdout) {
		t.Fatalf("--delete-offsets:\n%s", run.stdout)
	}
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(map[int32]int64{0: 6}) {
		t.Fatalf("after --delete-offsets on adm:1: %v", got)
	}
}

// TestKgoCommitsByTopicID commits through topic ids from franz-go: a group
// member's commits (kgo sends OffsetCommit v10 once every topic has an id),
// a raw TxnOffsetCommit v6 inside a transaction and kgo's transactional
// session (v6 too), each read back by name; an id that names no topic is
// refused with UNKNOWN_TOPIC_ID.
func TestKgoCommitsByTopicID(t *testing.T) {
	b := brokertest.Start(t, "--broker-config", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "byid"); err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, "byid")
	if err != nil {
		t.Fatal(err)
	}
	id := md.Topics["byid"].ID
	if id == (kadm.TopicID{}) {
		t.Fatal("topic byid has no id in Metadata")
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("byid-g"), kgo.ConsumeTopics("byid"), kgo.DisableAutoCommit(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 6; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "byid", Partition: int32(i % 2), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < 6; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 6", got)
		}
		got += fs.NumRecords()
	}
	var resp *kmsg.OffsetCommitResponse
	var commitErr error
	cl.CommitOffsetsSync(ctx, cl.UncommittedOffsets(), func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, r *kmsg.OffsetCommitResponse, err error) {
		resp, commitErr = r, err
	})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	if resp.Version != 10 || len(resp.Topics) != 1 || resp.Topics[0].TopicID != id {
		t.Fatalf("group commit answered at v%d with topics %+v, want v10 naming %x", resp.Version, resp.Topics, id)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
		}
	}
	fo, err := adm.FetchOffsets(ctx, "byid-g")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := fo.Lookup("byid", p); !ok || o.At != 3 {
			t.Fatalf("byid/%d committed %+v, want 3", p, o)
		}
	}

	// A transaction whose offsets are committed by id (TxnOffsetCommit v6)
	// for a group without members, as a transactional copier does.
	// EndTxn stays below v5 (transaction.version 2's epoch bump): this
	// test is about the commit, not the transaction protocol.
	tv1 := kversion.Stable()
	tv1.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	raw, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.MaxVersions(tv1))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("byid-tx"), 60_000
	ir, err := ip.RequestWith(ctx, raw)
	if err != nil || ir.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %+v", err, ir)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "byid-tx", ir.ProducerID, ir.ProducerEpoch, "byid-txg"
	if ar, err := ao.RequestWith(ctx, raw); err != nil || ar.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, ar)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = "byid-tx", "byid-txg", ir.ProducerID, ir.ProducerEpoch
	for _, tid := range [][16]byte{id, {0x01}} {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "byid", tid
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 1, 2
		rt.Partitions = append(rt.Partitions, rp)
		tc.Topics = append(tc.Topics, rt)
	}
	tr, err := tc.RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Version != 6 || len(tr.Topics) != 2 || tr.Topics[0].TopicID != id || tr.Topics[0].Partitions[0].ErrorCode != 0 ||
		tr.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("TxnOffsetCommit answered at v%d: %+v", tr.Version, tr.Topics)
	}
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = "byid-tx", ir.ProducerID, ir.ProducerEpoch, true
	if er, err := et.RequestWith(ctx, raw); err != nil || er.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %+v", err, er)
	}
	fo, err = adm.FetchOffsets(ctx, "byid-txg")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fo.Lookup("byid", 1); !ok || o.At != 2 {
		t.Fatalf("byid/1 committed by the transaction: %+v, want 2", o)
	}

	// kgo's own transactional consume-process-produce: with
	// transaction.version 2 finalized and every topic known by id, its
	// TxnOffsetCommit goes out at v6.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "byid-out"); err != nil {
		t.Fatal(err)
	}
	wrote := &wroteLog{seen: map[string]bool{}}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("byid-etl"), kgo.ConsumerGroup("byid-etl-g"),
		kgo.ConsumeTopics("byid"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(), kgo.WithLogger(wrote))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// kgo decides at Begin whether a transaction takes KIP-890 part 2, from
	// the broker versions it has loaded by then; the first Begin can come
	// before its connection's ApiVersions answer, so it may run the old
	// way, and kgo opts in at that transaction's end. The second runs the
	// new way.
	round := func(n int) {
		t.Helper()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < n; {
			fs := sess.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("transactional session consumed %d of %d", got, n)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got++
				sess.Produce(ctx, &kgo.Record{Topic: "byid-out", Value: r.Value}, nil)
			})
		}
		if committed, err := sess.End(ctx, kgo.TryCommit); err != nil || !committed {
			t.Fatalf("End: committed %v, %v", committed, err)
		}
	}
	round(6)
	for p := int32(0); p < 2; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "byid", Partition: p, Value: []byte("w")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	round(2)
	want := "TxnOffsetCommit v4"
	if brokerFeatureLevel(t, ctx, raw, "transaction.version") >= 2 {
		want = "TxnOffsetCommit v6"
	}
	if !wrote.has(want) {
		t.Fatalf("kgo's transactional commits: want %s; requests written: %v", want, wrote.list())
	}
	t.Logf("kgo's transactional session committed with %s", want)
	fo, err = adm.FetchOffsets(ctx, "byid-etl-g")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := fo.Lookup("byid", p); !ok || o.At != 4 {
			t.Fatalf("byid/%d committed by kgo's transactions: %+v, want 4", p, o)
		}
	}
}

// brokerFeatureLevel is the level of a feature the broker reports finalized in
// ApiVersions (0 when it reports none).
func brokerFeatureLevel(t *testing.T, ctx context.Context, cl *kgo.Client, name string) int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "regent-interop", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == name {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// wroteLog is a kgo logger that keeps the "wrote <Request> v<N>" debug
// lines: which requests the client sent, at which versions.
type wroteLog struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (l *wroteLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *wroteLog) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if w, ok := strings.CutPrefix(msg, "wrote "); ok {
		l.mu.Lock()
		l.seen[w] = true
		l.mu.Unlock()
	}
}

func (l *wroteLog) has(w string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[w]
}

func (l *wroteLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for w := range l.seen {
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

// TestKafkaConfigResourceListings runs the Kafka 4.3.1 tools that list
// config resources (ListConfigResources v1): kafka-client-metrics --list
// and kafka-configs --describe of client-metrics and groups. Regent has no
// client-metrics subscriptions and no group configs, so each lists
// nothing and succeeds; a named client-metrics resource is reported
// missing, as Kafka reports it.
func TestKafkaConfigResourceListings(t *testing.T) {
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const (
		clientMetrics = "org.apache.kafka.tools.ClientMetricsCommand"
		configs       = "kafka.admin.ConfigCommand"
	)
	run := runTool(t, ctx, lib, clientMetrics, "--bootstrap-server", b.Addr, "--list")
	wantVersion(t, "kafka-client-metrics --list", run, "LIST_CONFIG_RESOURCES", "1")
	if strings.TrimSpace(run.stdout) != "" || strings.Contains(run.stderr, "ERROR") {
		t.Fatalf("kafka-client-metrics --list:\n%s\n%s", run.stdout, lastLines(run.stderr, 20))
	}
	for _, entity := range []string{"client-metrics", "groups"} {
		run = runTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", entity)
		wantVersion(t, "kafka-configs --describe --entity-type "+entity, run, "LIST_CONFIG_RESOURCES", "1")
		if strings.TrimSpace(run.stdout) != "" {
			t.Fatalf("kafka-configs --describe --entity-type %s:\n%s", entity, run.stdout)
		}
	}
	run = runTool(t, ctx, lib, configs, "--bootstrap-server", b.Addr, "--describe", "--entity-type", "client-metrics", "--entity-name", "m1")
	if !strings.Contains(run.stdout, "The client-metric 'm1' doesn't exist") {
		t.Fatalf("kafka-configs --describe of a missing client-metrics resource:\n%s", run.stdout)
	}
}

// namesOnlyAdmin is an admin client whose OffsetCommits stay at v9, by
// topic name, as Kafka's own admin client sends them: kadm v1.17's
// CommitOffsets fills names only, which at v10 would be zero topic ids
// (UNKNOWN_TOPIC_ID from Regent, as from Kafka 4.1 and later).
func namesOnlyAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}
