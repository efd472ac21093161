package interop_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// prefixed counts the distinct keys delivered that start with prefix.
func (l *shareLedger) prefixed(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k := range l.byKey {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// TestShareIsolationLevel: share.isolation.level on the group decides
// what a share consumer gets of transactional records. A read_committed
// group never gets an aborted transaction's records and stops at the last
// stable offset while a transaction is open (neither its records nor later
// plain ones), then gets them once it commits; a read_uncommitted group
// gets everything, aborted records included.
func TestShareIsolationLevel(t *testing.T) {
	b := brokertest.Start(t, "--broker-config", shareBrokerConfig)
	requireShareGroups(t, b.Addr)
	shareIsolationLevel(t, b.Addr, "share-isolation")
}

// shareIsolationLevel runs TestShareIsolationLevel against the broker at
// addr with a topic, groups and transactional id named after topic.
func shareIsolationLevel(t *testing.T, addr, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := newClient(t, kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	txn := newClient(t, kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-txn"))
	produce := func(p *kgo.Client, prefix string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("%s-%d", prefix, i))}).FirstErr(); err != nil {
				t.Fatalf("produce %s-%d: %v", prefix, i, err)
			}
		}
	}
	inTxn := func(prefix string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(txn, prefix, 0, 50)
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end transaction %s: %v", prefix, err)
		}
	}
	produce(cl, "plain", 0, 50)
	inTxn("committed", kgo.TryCommit)
	inTxn("aborted", kgo.TryAbort)
	// An open transaction, then plain records after it.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(txn, "open", 0, 50)
	produce(cl, "late", 0, 50)

	ledgers := map[string]*shareLedger{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, level := range []string{"read_committed", "read_uncommitted"} {
		group := topic + "-" + level
		setShareGroupConfigs(t, ctx, cl, group, map[string]string{
			"share.auto.offset.reset": "earliest",
			"share.isolation.level":   level,
		})
		l := newShareLedger()
		ledgers[level] = l
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := kgoShareMember(ctx, []string{addr}, group, topic, level, l, stop); err != nil {
				t.Errorf("%s member: %v", level, err)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	rc, ru := ledgers["read_committed"], ledgers["read_uncommitted"]
	testwait.For(t, "read_uncommitted gets every record, aborted and open ones included", time.Minute, func() bool {
		return ru.distinct() == 250
	})
	testwait.For(t, "read_committed gets the plain and committed records", time.Minute, func() bool {
		return rc.prefixed("plain-") == 50 && rc.prefixed("committed-") == 50
	})
	// The read_committed member fetched up to the last stable offset by
	// now (its records all came in the fetches since); nothing at or past
	// the open transaction may have been delivered.
	for _, p := range []string{"aborted-", "open-", "late-"} {
		if n := rc.prefixed(p); n != 0 {
			t.Errorf("read_committed delivered %d %s records while the transaction was open", n, p)
		}
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "read_committed gets the open transaction's and the later records once it commits", time.Minute, func() bool {
		return rc.prefixed("open-") == 50 && rc.prefixed("late-") == 50
	})
	if n := rc.prefixed("aborted-"); n != 0 {
		t.Errorf("read_committed delivered %d aborted records", n)
	}
	for level, l := range ledgers {
		var keys []string
		l.mu.Lock()
		for k := range l.byKey {
			keys = append(keys, k)
		}
		l.mu.Unlock()
		if problems, _, _ := l.shareVerdict(keys, 5, false); len(problems) > 0 {
			t.Errorf("%s: %s", level, strings.Join(problems, "\n"))
		}
	}
}
