package interop_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// The tests below run Kafka 4.3's kafka-transactions.sh (list, describe,
// describe-producers, find-hanging, abort) against transactions left open
// by producers abandoned mid-transaction with a transaction.timeout.ms
// (30 min) far longer than the test, so Regent's coordinator never times
// them out here.
//
// The tool calls a transaction hanging only when the partition holds it
// open and its coordinator does not list the partition (Kafka's rule:
// otherwise the coordinator will end it at its timeout). A producer that
// dies mid-transaction therefore leaves a transaction the tool does not
// call hanging (TestKafkaTransactionsToolTrackedTxn) until its coordinator
// loses it (TestKafkaTransactionsToolHangingTxn).

// TestKafkaTransactionsToolTrackedTxn: the coordinator still has the
// abandoned transaction Ongoing with the partition; list and describe show
// it, describe-producers shows it open, find-hanging does not list it, and
// `abort` ends it on the partition anyway (an administrator's call, as in
// Kafka). The same transactional id then starts again: the coordinator
// ends the old transaction (its marker finds nothing open on the partition
// and succeeds) and the new one commits; read_committed consumers read the
// committed records and none of the aborted ones.
func TestKafkaTransactionsToolTrackedTxn(t *testing.T) {
	env := txnToolSetup(t)
	b, ctx, adm, tool := env.b, env.ctx, env.adm, env.tool
	const topic = "hang"
	abandonTxn(t, ctx, b.Addr, "tracked", topic, 1, "tracked-1", "tracked-2")
	producePlain(t, ctx, b.Addr, topic, 1, "plain-1")
	checkStuck(t, ctx, adm, topic, 1, 0, 3)

	list := toolTable(t, tool("list"), "TransactionalId")
	if row := toolRow(list, "TransactionalId", "tracked"); row == nil || row["TransactionState"] != "Ongoing" {
		t.Fatalf("list: tracked not Ongoing: %v", list)
	}
	desc := toolTable(t, tool("describe", "--transactional-id", "tracked"), "CoordinatorId")
	if len(desc) != 1 || desc[0]["TransactionState"] != "Ongoing" || desc[0]["TopicPartitions"] != topic+"-1" ||
		desc[0]["TransactionTimeoutMs"] != "1800000" {
		t.Fatalf("describe tracked: %v", desc)
	}
	prods := toolTable(t, tool("describe-producers", "--topic", topic, "--partition", "1"), "ProducerId")
	open := toolRow(prods, "CurrentTransactionStartOffset", "0")
	if open == nil || open["ProducerId"] != desc[0]["ProducerId"] || open["LastSequence"] != "1" {
		t.Fatalf("describe-producers %s-1: no open transaction of producer %s at 0: %v", topic, desc[0]["ProducerId"], prods)
	}
	// Not hanging: its coordinator will end it.
	if hanging := toolTable(t, tool("find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"), "Topic"); len(hanging) != 0 {
		t.Fatalf("find-hanging lists a transaction its coordinator tracks: %v", hanging)
	}
	tool("abort", "--topic", topic, "--partition", "1", "--start-offset", "0")
	waitStable(t, ctx, adm, topic, 1, 4)
	// The same transactional id again: InitProducerId ends the old
	// transaction at the coordinator, and the new one commits.
	commitTxn(t, ctx, b.Addr, "tracked", topic, 1, "fresh")
	readCommittedExactly(t, ctx, b.Addr, topic, 1, []string{"plain-1", "fresh"})
	desc = toolTable(t, tool("describe", "--transactional-id", "tracked"), "CoordinatorId")
	if len(desc) != 1 || desc[0]["TransactionState"] != "CompleteCommit" {
		t.Fatalf("describe tracked after the new producer committed: %v", desc)
	}
}

// TestKafkaTransactionsToolHangingTxn: a producer abandons its transaction
// and the coordinator then loses it (its log removed while the broker is
// down, as an unclean election of __transaction_state loses it in Kafka)
// while the partition keeps it open from its own log: read_committed
// consumers are stuck at the last stable offset, find-hanging lists it (by
// --broker-id and by --topic; not under the default 15-minute threshold),
// `abort` clears it, and read_committed consumers advance past it without
// reading its records.
func TestKafkaTransactionsToolHangingTxn(t *testing.T) {
	env := txnToolSetup(t)
	b, ctx, adm, tool := env.b, env.ctx, env.adm, env.tool
	const topic = "hang"
	abandonTxn(t, ctx, b.Addr, "lost", topic, 0, "lost-1", "lost-2", "lost-3")
	producePlain(t, ctx, b.Addr, topic, 0, "after-1", "after-2")
	checkStuck(t, ctx, adm, topic, 0, 0, 5)
	b.Kill()
	removeTxnLog(t, b.Dir)
	b.Restart()
	checkStuck(t, ctx, adm, topic, 0, 0, 5) // the partition's log keeps it open

	if out, err := env.run("describe", "--transactional-id", "lost"); err == nil || !strings.Contains(out, "could not be found") {
		t.Fatalf("describe lost after its coordinator lost it: %v\n%s", err, out)
	}
	var pid string
	for _, args := range [][]string{
		{"find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"},
		{"find-hanging", "--topic", topic, "--max-transaction-timeout", "0"},
	} {
		hanging := toolTable(t, tool(args...), "Topic")
		if len(hanging) != 1 || hanging[0]["Topic"] != topic || hanging[0]["Partition"] != "0" || hanging[0]["StartOffset"] != "0" {
			t.Fatalf("%s: want the transaction at %s-0 offset 0: %v", strings.Join(args, " "), topic, hanging)
		}
		pid = hanging[0]["ProducerId"]
	}
	// A threshold above its age (15 minutes, the tool's default) hides it.
	if hanging := toolTable(t, tool("find-hanging", "--broker-id", "1"), "Topic"); len(hanging) != 0 {
		t.Fatalf("find-hanging with the default 15-minute threshold: %v", hanging)
	}
	prods := toolTable(t, tool("describe-producers", "--topic", topic, "--partition", "0"), "ProducerId")
	if open := toolRow(prods, "ProducerId", pid); open == nil || open["CurrentTransactionStartOffset"] != "0" {
		t.Fatalf("describe-producers %s-0: producer %s not open at 0: %v", topic, pid, prods)
	}

	tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
	waitStable(t, ctx, adm, topic, 0, 6)
	readCommittedExactly(t, ctx, b.Addr, topic, 0, []string{"after-1", "after-2"})
	if hanging := toolTable(t, tool("find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"), "Topic"); len(hanging) != 0 {
		t.Fatalf("find-hanging after the abort: %v", hanging)
	}
	prods = toolTable(t, tool("describe-producers", "--topic", topic, "--partition", "0"), "ProducerId")
	if row := toolRow(prods, "ProducerId", pid); row == nil || row["CurrentTransactionStartOffset"] != "None" {
		t.Fatalf("describe-producers %s-0 after the abort: %v", topic, prods)
	}
	// A second abort of the same offset finds nothing open: the tool says so.
	if out, err := env.run("abort", "--topic", topic, "--partition", "0", "--start-offset", "0"); err == nil ||
		!strings.Contains(out, "Could not find any open transactions starting at offset 0") {
		t.Fatalf("second abort: %v\n%s", err, out)
	}
}

// txnToolEnv is a broker with a topic "hang" of two partitions, a context
// bounding the test, an admin client and Kafka's jars.
type txnToolEnv struct {
	t   *testing.T
	b   *brokertest.Broker
	ctx context.Context
	adm *kadm.Client
	lib string
}

func txnToolSetup(t *testing.T) *txnToolEnv {
	t.Helper()
	lib := kafkaLib(t)
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	adm := newAdmin(t, b.Addr)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "hang"); err != nil {
		t.Fatal(err)
	}
	return &txnToolEnv{t: t, b: b, ctx: ctx, adm: adm, lib: lib}
}

// tool runs kafka-transactions.sh with args and fails the test if it fails.
func (e *txnToolEnv) tool(args ...string) string {
	e.t.Helper()
	start := time.Now()
	out, err := e.run(args...)
	e.t.Logf("kafka-transactions %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		e.t.Fatalf("kafka-transactions %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// run runs kafka-transactions.sh's class against the broker; its output is
// stdout, then stderr.
func (e *txnToolEnv) run(args ...string) (string, error) {
	log4j, _ := filepath.Abs(filepath.Join("..", "bench", "log4j2.properties"))
	// One short-lived JVM per call: C1-only JIT and the serial collector
	// start fastest on a busy machine.
	full := append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", filepath.Join(e.lib, "*"),
		"-Dlog4j2.configurationFile=" + log4j, "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", e.b.Addr}, args...)
	cmd := exec.CommandContext(e.ctx, "java", full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}

// toolTable parses the tool's table (cells padded, each followed by a
// tab): the line starting with header names the columns, each following
// non-empty line is a row (an empty cell is "").
func toolTable(t *testing.T, out, header string) []map[string]string {
	t.Helper()
	var cols []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		cells := strings.Split(strings.TrimSuffix(line, "\t"), "\t")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case cols == nil && cells[0] == header:
			cols = cells
		case cols != nil && len(cells) == len(cols):
			row := map[string]string{}
			for i, c := range cols {
				row[c] = cells[i]
			}
			rows = append(rows, row)
		case cols != nil:
			t.Fatalf("row %q does not match the columns %v:\n%s", line, cols, out)
		}
	}
	if cols == nil {
		t.Fatalf("no table headed %q in:\n%s", header, out)
	}
	return rows
}

// toolRow is the first row whose col is val, or nil.
func toolRow(rows []map[string]string, col, val string) map[string]string {
	for _, r := range rows {
		if r[col] == val {
			return r
		}
	}
	return nil
}

// abandonTxn is a transactional producer that writes values to the partition
// and goes away without ending its transaction.
func abandonTxn(t *testing.T, ctx context.Context, addr, txnID, topic string, partition int32, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(txnID), kgo.TransactionTimeout(30*time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() // no EndTransaction: the transaction stays open
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("%s produce: %v", txnID, err)
	}
}

// commitTxn writes value in a committed transaction of txnID.
func commitTxn(t *testing.T, ctx context.Context, addr, txnID, topic string, partition int32, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(txnID), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("%s produce: %v", txnID, err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("%s commit: %v", txnID, err)
	}
}

// producePlain writes values without a transaction.
func producePlain(t *testing.T, ctx context.Context, addr, topic string, partition int32, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkStuck checks the partition's last stable offset is lso while its end
// is hw: read_committed consumers cannot pass lso.
func checkStuck(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partition int32, lso, hw int64) {
	t.Helper()
	gotLSO, gotHW := stableAndEnd(t, ctx, adm, topic, partition)
	if gotLSO != lso || gotHW != hw {
		t.Fatalf("%s-%d: last stable %d, end %d; want %d and %d", topic, partition, gotLSO, gotHW, lso, hw)
	}
}

// waitStable waits for the partition's last stable offset to reach its
// end, hw.
func waitStable(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partition int32, hw int64) {
	t.Helper()
	var lso, end int64
	if !testwait.Until(30*time.Second, func() bool {
		lso, end = stableAndEnd(t, ctx, adm, topic, partition)
		return lso == hw && end == hw
	}) {
		t.Fatalf("%s-%d: last stable %d, end %d; want both %d", topic, partition, lso, end, hw)
	}
}

func stableAndEnd(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partition int32) (lso, hw int64) {
	t.Helper()
	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	c, ok1 := committed.Lookup(topic, partition)
	e, ok2 := ends.Lookup(topic, partition)
	if !ok1 || !ok2 || c.Err != nil || e.Err != nil {
		t.Fatalf("%s-%d offsets: %v %v / %v %v", topic, partition, ok1, c.Err, ok2, e.Err)
	}
	return c.Offset, e.Offset
}

// readCommittedExactly reads the partition from its start with read_committed
// until as many records as want arrived, and checks they are want, in
// order: an aborted record would have come before the last wanted one
// (records are delivered in offset order) and shown up here.
func readCommittedExactly(t *testing.T, ctx context.Context, addr, topic string, partition int32, want []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(got) < len(want) {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read_committed %s-%d: read %q before the deadline, want %q", topic, partition, got, want)
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s-%d: %v", topic, partition, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read_committed %s-%d read %q, want %q", topic, partition, got, want)
	}
}

// removeTxnLog deletes the transaction coordinator's log (DATA/.../txn)
// from a stopped broker's data directory.
func removeTxnLog(t *testing.T, dataDir string) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "txn" {
			if _, serr := os.Stat(filepath.Join(path, "txn.log")); serr == nil {
				dirs = append(dirs, path)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 {
		t.Fatalf("want one transaction coordinator log under %s, found %v", dataDir, dirs)
	}
	if err := os.RemoveAll(dirs[0]); err != nil {
		t.Fatal(err)
	}
}
