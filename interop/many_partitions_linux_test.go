package interop_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// brokerFDs counts the broker process's open descriptors.
func brokerFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot count the broker's descriptors: %v", err)
	}
	return len(ents)
}

// setFileLimit sets the soft and hard RLIMIT_NOFILE of process pid
// (prlimit(2); the standard library has no wrapper).
func setFileLimit(pid int, n uint64) error {
	lim := syscall.Rlimit{Cur: n, Max: n}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_NOFILE),
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// TestManyPartitionsBoundedDescriptors runs the broker with a descriptor
// limit of 1,024 and creates 2,000 partitions with one CreateTopics: 6,000
// segment files, where one descriptor per file used to run out at about a
// third of the limit in partitions (20,000 descriptors at ~6,600). Then it
// produces to and consumes from every 10th partition. The broker's
// descriptors, sampled throughout, stay within its file cache
// (--max-open-files 256) plus room for sockets and short-lived files. The
// count is what fits the time budget: creating a partition costs a few
// fsyncs.
func TestManyPartitionsBoundedDescriptors(t *testing.T) {
	const (
		limit      = 1024
		partitions = 2_000
		every      = 10
		cache      = 256
		fdBound    = cache + 256
	)
	b := brokertest.Start(t, "--max-open-files", strconv.Itoa(cache))
	pid := b.PID()
	if err := setFileLimit(pid, limit); err != nil {
		t.Skipf("cannot limit the broker's descriptors: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	peak := brokerFDs(t, pid)
	sample := func() {
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			mu.Lock()
			peak = max(peak, len(ents))
			mu.Unlock()
		}
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	stopSampling := func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-sampled
		}
	}
	defer stopSampling()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(90_000)

	start := time.Now()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, "many")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("CreateTopics with %d partitions: %v (%s)\n%s", partitions, err, resp.ErrMessage, b.LogTail(2000))
	}
	created := time.Since(start)

	// The client needs metadata for the new topic before producing.
	testwait.For(t, "metadata for the new topic", testwait.Default, func() bool {
		md, err := adm.Metadata(ctx, "many")
		return err == nil && len(md.Topics["many"].Partitions) == partitions
	})
	var recs []*kgo.Record
	for p := 0; p < partitions; p += every {
		recs = append(recs, &kgo.Record{Topic: "many", Partition: int32(p), Value: []byte(strconv.Itoa(p))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %d partitions: %v", len(recs), err)
	}
	produced := time.Since(start)

	offsets := map[string]map[int32]kgo.Offset{"many": {}}
	for p := 0; p < partitions; p += every {
		offsets["many"][int32(p)] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumePartitions(offsets),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[int32]bool{}
	for len(seen) < len(recs) && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 && ctx.Err() == nil {
			t.Fatalf("fetch: %v", errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(int(r.Partition)) {
				t.Errorf("partition %d returned %q", r.Partition, r.Value)
			}
			seen[r.Partition] = true
		})
	}
	if len(seen) != len(recs) {
		t.Fatalf("consumed from %d of %d partitions: %v", len(seen), len(recs), ctx.Err())
	}
	stopSampling()
	sample()
	if peak > fdBound {
		t.Fatalf("broker held %d descriptors with %d partitions, bound %d", peak, partitions, fdBound)
	}
	t.Logf("%d partitions under RLIMIT_NOFILE %d: created in %s, produced %d records by %s, consumed by %s; broker descriptors peak %d (bound %d)",
		partitions, limit, created.Round(time.Millisecond), len(recs), produced.Round(time.Millisecond),
		time.Since(start).Round(time.Millisecond), peak, fdBound)
}
