package interop_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/regent-broker/regent/interop/brokertest"
)

// TestOldestFetchAndProduce: SPEC §1 serves Produce from v3 and Fetch from
// v4, the oldest record-batch versions. A franz-go client pinned to Kafka
// 0.11's request versions with Fetch lowered to v4 (sarama's oldest
// setting sends Fetch v5) produces plainly, idempotently and in
// transactions (one aborted, one committed), and reads back with
// read_uncommitted and read_committed: every record once, in order, and no
// aborted one under read_committed (v4 carries the aborted transactions).
func TestOldestFetchAndProduce(t *testing.T) {
	const topic = "oldest-versions"
	// Every client goes through a proxy that notes the versions sent.
	proxy := startVersionProxy(t)
	b := brokertest.Start(t, "--advertise", proxy.Addr())
	proxy.serve(b.Addr)
	addr := proxy.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := kversion.V0_11_0()
	old.SetMaxKeyVersion(1, 4) // Fetch
	if v, _ := old.LookupMaxKeyVersion(0); v != 3 {
		t.Fatalf("Kafka 0.11's Produce is v%d, want v3", v)
	}
	adm := newAdmin(t, b.Addr) // admin requests go straight to the broker
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	plain := newClient(t, kgo.SeedBrokers(addr), kgo.MaxVersions(old), kgo.DefaultProduceTopic(topic))
	var want []string
	for i := range 100 {
		v := fmt.Sprintf("plain-%d", i)
		want = append(want, v)
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(i % 2)}, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce v3: %v", err)
		}
	}
	txn := newClient(t, kgo.SeedBrokers(addr), kgo.MaxVersions(old), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("oldest-versions-txn"))
	for _, commit := range []bool{false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			v := fmt.Sprintf("txn-%v-%d", commit, i)
			if commit {
				want = append(want, v)
			}
			if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte{byte(i % 2)}, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("transactional produce v3: %v", err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(iso kgo.IsolationLevel, n int) map[string]int {
		cl := newClient(t, kgo.SeedBrokers(addr), kgo.MaxVersions(old), kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
		seen := map[string]int{}
		last := map[int32]int64{0: -1, 1: -1}
		for got := 0; got < n; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records with Fetch v4 before the deadline", got, n)
			}
			fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch v4 %s/%d: %v", tp, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset <= last[r.Partition] {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, last[r.Partition])
				}
				last[r.Partition] = r.Offset
				seen[string(r.Value)]++
				got++
			})
		}
		cl.Close()
		return seen
	}
	committed := read(kgo.ReadCommitted(), len(want))
	for _, v := range want {
		if committed[v] != 1 {
			t.Fatalf("read_committed with Fetch v4: %q read %d times", v, committed[v])
		}
	}
	if len(committed) != len(want) {
		t.Fatalf("read_committed with Fetch v4 read %d distinct records, want %d (an aborted one among them?)", len(committed), len(want))
	}
	all := read(kgo.ReadUncommitted(), len(want)+10)
	if all["txn-false-0"] != 1 {
		t.Fatalf("read_uncommitted with Fetch v4 does not see the aborted records")
	}
	sent := proxy.take()
	if !slices.Equal(sent[0], []int16{3}) || !slices.Equal(sent[1], []int16{4}) {
		t.Fatalf("the pinned clients sent Produce %v and Fetch %v, want only v3 and v4", sent[0], sent[1])
	}
	t.Logf("sent through the proxy: %s", formatVersions(sent))
	t.Logf("Produce v3 and Fetch v4: %d records read_committed (no aborted one), %d read_uncommitted", len(committed), len(all))
}
