package interop_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestReadCommittedStress: transactional producers commit and abort
// concurrently while a read_committed consumer group reads; the group must
// never see a record of an aborted transaction, and must see every
// committed one. It is seeded (the seed is printed; REGENT_STRESS_SEED
// replays one) and bounded: REGENT_STRESS_RUNS runs (default 1) of
// REGENT_STRESS_DURATION of producing each (default 10s, 3s with -short),
// each on a fresh broker. The schedule of requests is the machine's, so a
// seed fixes what is produced and aborted, not the interleaving.
func TestReadCommittedStress(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REGENT_STRESS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("REGENT_STRESS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	runs := 1
	if s := os.Getenv("REGENT_STRESS_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 100 {
			t.Fatalf("REGENT_STRESS_RUNS=%q: want 1..100", s)
		}
		runs = v
	}
	dur := 10 * time.Second
	if testing.Short() {
		dur = 3 * time.Second
	}
	if s := os.Getenv("REGENT_STRESS_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 || v > 5*time.Minute {
			t.Fatalf("REGENT_STRESS_DURATION=%q: want a duration up to 5m", s)
		}
		dur = v
	}
	for i := range runs {
		runSeed := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", runSeed), func(t *testing.T) {
			t.Logf("seed %d (replay with REGENT_STRESS_SEED=%d)", runSeed, runSeed)
			st := runReadCommittedStress(t, runSeed, dur)
			t.Logf("seed %d: %d transactions committed (%d records), %d aborted (%d records); read_committed saw %d aborted values, %d committed values (%d deliveries)",
				runSeed, st.committedTxns, st.committedRecs, st.abortedTxns, st.abortedRecs, st.abortedSeen, st.committedSeen, st.deliveries)
		})
	}
}

const (
	rcProducers  = 6
	rcPartitions = 4
	rcAbortRate  = 0.4
)

type rcStats struct {
	committedTxns, abortedTxns int
	committedRecs, abortedRecs int
	abortedSeen, committedSeen int
	deliveries                 int
}

// rcTxn names one transaction: producer index and its sequence number.
type rcTxn struct{ producer, seq int }

// rcValue is the value of record i of a transaction; the consumer side
// parses the transaction back out of it.
func rcValue(tx rcTxn, i int) string { return fmt.Sprintf("p%d/t%d/r%d", tx.producer, tx.seq, i) }

func rcParse(v string) (rcTxn, bool) {
	var tx rcTxn
	var i int
	if _, err := fmt.Sscanf(v, "p%d/t%d/r%d", &tx.producer, &tx.seq, &i); err != nil {
		return rcTxn{}, false
	}
	return tx, true
}

func runReadCommittedStress(t *testing.T, seed uint64, dur time.Duration) rcStats {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), dur+3*time.Minute)
	defer cancel()
	topics := []string{"rc-stress-a", "rc-stress-b"}
	adm := newAdmin(t, b.Addr)
	for _, topic := range topics {
		if _, err := adm.CreateTopic(ctx, rcPartitions, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}

	// Consumers: two members of one read_committed group, polling until
	// told to stop. seen counts deliveries per value (a rebalance may
	// deliver twice: that is allowed, an aborted value never is).
	var seenMu sync.Mutex
	seen := map[string]int{}
	stop := make(chan struct{})
	var consumers sync.WaitGroup
	consumerErr := make(chan error, 2)
	for m := range 2 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("rc-stress"), kgo.ConsumeTopics(topics...),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.ClientID(fmt.Sprintf("rc-consumer-%d", m)))
		if err != nil {
			t.Fatal(err)
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			defer cl.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				if ctx.Err() != nil {
					return
				}
				var ferr error
				fs.EachError(func(tp string, p int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
						ferr = fmt.Errorf("member %d fetch %s/%d: %w", m, tp, p, err)
					}
				})
				if ferr != nil {
					consumerErr <- ferr
					return
				}
				seenMu.Lock()
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
				seenMu.Unlock()
			}
		}()
	}
	defer func() {
		close(stop)
		consumers.Wait()
	}()

	// Producers: each runs transactions until the deadline; an outcome is
	// recorded once EndTransaction has returned.
	var outMu sync.Mutex
	outcome := map[rcTxn]bool{} // true: committed
	sizes := map[rcTxn]int{}
	produceUntil := time.Now().Add(dur)
	var producers sync.WaitGroup
	prodErr := make(chan error, rcProducers)
	for p := range rcProducers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID(fmt.Sprintf("rc-stress-%d", p)),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, uint64(p)))
		producers.Add(1)
		go func() {
			defer producers.Done()
			defer cl.Close()
			for seq := 0; time.Now().Before(produceUntil); seq++ {
				tx := rcTxn{p, seq}
				n := 4 + rng.IntN(11)
				commit := rng.Float64() >= rcAbortRate
				recs := make([]*kgo.Record, n)
				for i := range recs {
					// The first two records go to each topic; the
					// rest anywhere.
					topic := topics[i%2]
					if i >= 2 {
						topic = topics[rng.IntN(2)]
					}
					recs[i] = &kgo.Record{Topic: topic, Partition: int32(rng.IntN(rcPartitions)), Value: []byte(rcValue(tx, i))}
				}
				if err := cl.BeginTransaction(); err != nil {
					prodErr <- fmt.Errorf("producer %d txn %d begin: %w", p, seq, err)
					return
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					prodErr <- fmt.Errorf("producer %d txn %d produce: %w", p, seq, err)
					return
				}
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					prodErr <- fmt.Errorf("producer %d txn %d end (commit=%v): %w", p, seq, commit, err)
					return
				}
				outMu.Lock()
				outcome[tx], sizes[tx] = commit, n
				outMu.Unlock()
			}
		}()
	}
	producers.Wait()
	close(prodErr)
	for err := range prodErr {
		// No faults are injected: every transaction must end as asked.
		t.Fatal(err)
	}

	// One plain record at the end of every partition: once the group has
	// all of them it has read every partition to its end.
	sentinels := map[string]bool{}
	plain, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var srecs []*kgo.Record
	for _, topic := range topics {
		for p := range int32(rcPartitions) {
			v := fmt.Sprintf("sentinel/%s/%d", topic, p)
			sentinels[v] = true
			srecs = append(srecs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
		}
	}
	if err := plain.ProduceSync(ctx, srecs...).FirstErr(); err != nil {
		t.Fatalf("sentinels: %v", err)
	}

	var st rcStats
	for tx, commit := range outcome {
		if commit {
			st.committedTxns++
			st.committedRecs += sizes[tx]
		} else {
			st.abortedTxns++
			st.abortedRecs += sizes[tx]
		}
	}
	// missing lists what the group has yet to see; the aborted values it
	// saw are counted every time (they can only grow).
	check := func() (missing []string) {
		seenMu.Lock()
		defer seenMu.Unlock()
		st.abortedSeen, st.committedSeen, st.deliveries = 0, 0, 0
		for v, n := range seen {
			st.deliveries += n
			if sentinels[v] {
				continue
			}
			tx, ok := rcParse(v)
			commit, known := outcome[tx]
			switch {
			case !ok || !known:
				t.Errorf("read_committed saw %q, which no finished transaction wrote", v)
			case !commit:
				st.abortedSeen++
			default:
				st.committedSeen++
			}
		}
		for v := range sentinels {
			if seen[v] == 0 {
				missing = append(missing, v)
			}
		}
		for tx, commit := range outcome {
			if !commit {
				continue
			}
			for i := range sizes[tx] {
				if v := rcValue(tx, i); seen[v] == 0 {
					missing = append(missing, v)
				}
			}
		}
		return missing
	}
	drainBy := time.Now().Add(60 * time.Second)
	for {
		missing := check()
		if len(missing) == 0 {
			break
		}
		select {
		case err := <-consumerErr:
			t.Fatal(err)
		default:
		}
		if time.Now().After(drainBy) {
			if len(missing) > 5 {
				missing = missing[:5]
			}
			t.Fatalf("seed %d: read_committed group still misses committed values 60s after the producers stopped (e.g. %s)", seed, strings.Join(missing, ", "))
		}
		time.Sleep(50 * time.Millisecond) // polling the group's progress, not synchronizing
	}
	if st.abortedSeen != 0 {
		t.Errorf("seed %d: read_committed saw %d values of aborted transactions", seed, st.abortedSeen)
	}
	if st.committedTxns == 0 || st.abortedTxns == 0 {
		t.Errorf("seed %d: %d committed and %d aborted transactions: the run exercised nothing", seed, st.committedTxns, st.abortedTxns)
	}
	return st
}
