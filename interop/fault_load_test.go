package interop_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// faultLoad is the load the cluster fault tests run while they break
// things, and the check of what it left: two idempotent producers
// (acks=all) writing paced streams to a 6-partition RF-3 topic, and a
// transactional producer running transactions over two topics,
// committing or aborting each at random (seeded; the seed is logged and
// REGENT_FAULT_SEED replays it). A one-partition probe topic is there
// for a scenario's fresh clients. Its methods are for the test's own
// goroutine.
type faultLoad struct {
	t     *testing.T
	ctx   context.Context
	c     *brokertest.Cluster
	seed  uint64
	began time.Time

	idemTopic, probeTopic string
	txnTopics             []string
	// opts are the fault clients' options (faultClientOpts).
	opts      []kgo.Opt
	counts    *clientCounts
	producers []*producer
	tw        *txnWorker
	figures   []string
}

const (
	faultIdemPartitions = 6
	faultTxnPartitions  = 2
	faultPerProducer    = 1000 // records a second, each idempotent producer
)

// startFaultLoad creates the topics (named after prefix) on c and starts
// the producers; they stop when the test ends, if verify has not stopped
// them.
func startFaultLoad(t *testing.T, ctx context.Context, c *brokertest.Cluster, prefix string) *faultLoad {
	t.Helper()
	l := &faultLoad{
		t: t, ctx: ctx, c: c, seed: faultSeed(t), began: time.Now(),
		idemTopic: prefix + "-idem", probeTopic: prefix + "-probe",
		txnTopics: []string{prefix + "-txn-a", prefix + "-txn-b"},
		counts:    new(clientCounts),
	}
	t.Logf("seed %d (replay with REGENT_FAULT_SEED=%d)", l.seed, l.seed)
	for _, topic := range append([]string{l.idemTopic, l.probeTopic}, l.txnTopics...) {
		n := faultTxnPartitions
		switch topic {
		case l.probeTopic:
			n = 1
		case l.idemTopic:
			n = faultIdemPartitions
		}
		createClusterTopic(t, ctx, c, topic, n, 3)
		c.WaitTopic(t, topic, n, 3, time.Minute)
	}
	t.Cleanup(func() { l.counts.dumpIfFailed(t) })
	l.opts = faultClientOpts(l.counts)
	l.producers = []*producer{
		startPacedProducer(t, ctx, c, l.idemTopic, faultIdemPartitions, "idem-a", faultPerProducer, l.opts...),
		startPacedProducer(t, ctx, c, l.idemTopic, faultIdemPartitions, "idem-b", faultPerProducer, l.opts...),
	}
	l.tw = startTxnWorker(ctx, c, l.seed, l.txnTopics, faultTxnPartitions, l.opts)
	t.Cleanup(func() {
		for _, pr := range l.producers {
			pr.abort()
		}
		l.tw.abort()
	})
	return l
}

// faultClientOpts are the options of clients that must find a new leader
// while the old one is stopped or cut off. With kgo's defaults one would
// not within a 10 s fault: it waits 20 s for a produce answer, then
// retries on the same broker without asking for metadata (an i/o timeout
// is no sign the leader moved; the stopped node still accepts
// connections, so each retry waits for its ApiVersions to time out), and
// a metadata request it sends may go to the stopped node too. A
// partition's batches move to the new leader only once every request that
// holds them on the old one has failed. Hence short request deadlines,
// metadata at most 1 s old, and one produce request in flight per broker
// (with kgo's five, the stopped node's requests failed one after another
// and a client once had nothing acknowledged 6 s after the election). kgo
// also spaces metadata refreshes by MetadataMinAge (5 s by default): a
// refresh answered just before the election (naming the stopped leader)
// held off the next one, and the clients sent nothing to the new leader
// for the rest of the pause (3 runs in 25 whose election took over
// 2.3 s).
func faultClientOpts(counts *clientCounts) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ProduceRequestTimeout(2 * time.Second),
		kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.MetadataMaxAge(time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MaxProduceRequestsInflightPerBroker(1),
		kgo.WithHooks(counts),
	}
	if os.Getenv("REGENT_TEST_KGO_LOG") == "" {
		opts = append(opts, kgo.WithLogger(counts))
	}
	return opts
}

// acks is how many idempotent records have been acknowledged.
func (l *faultLoad) acks() int64 {
	var n int64
	for _, pr := range l.producers {
		n += pr.acked()
	}
	return n
}

// progress waits until the idempotent producers have had records more
// acknowledged and the transactional one has committed txns more
// transactions, and returns the time since from.
func (l *faultLoad) progress(what string, from time.Time, records, txns int64) time.Duration {
	l.t.Helper()
	a0, c0 := l.acks(), l.tw.committed()
	testwait.For(l.t, what, time.Minute, func() bool {
		for _, pr := range l.producers {
			pr.check(l.t)
		}
		if err := l.tw.failure(); err != nil {
			l.t.Fatalf("transactional producer: %v", err)
		}
		return l.acks() >= a0+records && l.tw.committed() >= c0+txns
	})
	return time.Since(from)
}

// steady lets the load run on the whole cluster for a while between
// faults: about 3 s of records and a few transactions.
func (l *faultLoad) steady(what string) {
	l.t.Helper()
	l.progress(what, time.Now(), 3*2*faultPerProducer, 3)
}

// figure logs a figure and keeps it for the closing summary.
func (l *faultLoad) figure(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	l.figures = append(l.figures, s)
	l.t.Log(s)
}

// commitStarts arms the transactional producer (armCommit) and waits
// until it sends a commit.
func (l *faultLoad) commitStarts(giveUp time.Duration) {
	l.t.Helper()
	select {
	case <-l.tw.armCommit(giveUp):
	case <-time.After(30 * time.Second):
		l.t.Fatalf("the transactional producer sent no commit within 30s (%d committed)", l.tw.committed())
	}
}

// stopAndVerify stops the load, lets every record in flight be answered,
// and reads every topic back:
//   - read_committed, every acknowledged idempotent record is at its
//     acknowledged offset, no value is there twice, nothing
//     unacknowledged is there, and each producer's records keep its order
//     within a partition;
//   - every committed transaction's records are all there, once, in
//     order; none of an aborted one's; a transaction whose commit answer
//     was lost to a fault is all there or not at all;
//   - read_uncommitted with the control records kept shows the aborted
//     transactions' records followed by ABORT markers, and the committed
//     ones' by COMMIT markers.
//
// It then logs the summary of the figures.
func (l *faultLoad) stopAndVerify() {
	t, ctx, c := l.t, l.ctx, l.c
	t.Helper()
	var all []acked
	for _, pr := range l.producers {
		all = append(all, pr.finish(t)...)
	}
	txns := l.tw.stopAndWait()
	if err := l.tw.failure(); err != nil {
		t.Fatalf("transactional producer: %v", err)
	}
	sentinels := commitSentinels(t, ctx, c, l.txnTopics, faultTxnPartitions, l.opts)
	loadEnded := time.Now()

	c.WaitTopic(t, l.idemTopic, faultIdemPartitions, 3, time.Minute)
	idemLog := readLog(t, ctx, c, l.idemTopic, faultIdemPartitions, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	verifyAcked(t, "idempotent producers after the faults", idemLog, all)
	checkProducerOrder(t, idemLog)

	committed := readTxnTopics(t, ctx, c, l.txnTopics, faultTxnPartitions, true, sentinels)
	uncommitted := readTxnTopics(t, ctx, c, l.txnTopics, faultTxnPartitions, false, sentinels)
	sum := checkTxns(t, txns, committed, uncommitted)

	tw, counts := l.tw, l.counts
	l.figure("seed %d: %d idempotent records acknowledged (%d produce failures); %d transactions: %d committed (%d records), %d aborted (%d asked, %d after an error), %d with a commit whose outcome was lost (%d found committed, %d aborted); transactional client re-inits %d, errors in begin %d, produce %d, EndTxn %d; mean transaction %v",
		l.seed, len(all), failedRecords(l.producers), len(txns), sum.committed, sum.committedRecs, sum.aborted, sum.askedAbort, sum.errAbort,
		sum.unknown, sum.unknownCommitted, sum.unknownAborted, tw.stats.reinits.Load(), tw.stats.beginErrs.Load(), tw.stats.produceErrs.Load(), tw.stats.endErrs.Load(),
		(time.Duration(tw.stats.busyNanos.Load()) / time.Duration(max(1, len(txns)))).Round(time.Millisecond))
	for _, e := range tw.notes() {
		l.figure("transactional client error: %s", e)
	}
	l.figure("clients: %d requests failed on the wire, %d dials failed, %d disconnects, %d warnings or errors logged (e.g. %s)",
		counts.reqErrs.Load(), counts.dialErrs.Load(), counts.disconnects.Load(), counts.warnings.Load(), counts.sample())
	l.figure("whole scenario %v, verification %v", loadEnded.Sub(l.began).Round(time.Millisecond), time.Since(loadEnded).Round(time.Millisecond))
	t.Logf("summary:\n  %s", strings.Join(l.figures, "\n  "))
}
