package interop_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/regent-broker/regent/interop/brokertest"
	"github.com/regent-broker/regent/interop/testwait"
)

// TestClusterRetentionSameLogStartAfterFailover: retention goes through the
// raft log (the leader decides, every node applies the new log start), so
// after retention, a kill -9 of the leader, more retention under the next
// leader and the old leader's return, every node reports the same log start
// (and end) offset for every partition on its own /metrics.
func TestClusterRetentionSameLogStartAfterFailover(t *testing.T) {
	const (
		topic      = "cluster-retention"
		partitions = 2
		perRound   = 300     // records per partition per round
		valueSize  = 8 << 10 // 300 x 8 KiB: 2.4 MB per partition, over 1 MiB segments
	)
	skipClusterInShort(t)
	c := brokertest.StartCluster(t, 3, "--retention-check-interval", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), clusterTestTimeout)
	defer cancel()
	// Each node serves its own /metrics, on a port of its own: the
	// harness gives every node the same extra flags, so each is restarted
	// once with its port (one at a time: the other two keep the quorum).
	// A restart takes a fresh port, as the old one may have been handed
	// out meanwhile.
	metrics := map[int32]string{}
	restartWithMetrics := func(id int32) {
		t.Helper()
		n := c.Node(id)
		metrics[id] = fmt.Sprintf("127.0.0.1:%d", brokertest.FreePort(t))
		if i := slices.Index(n.Args, "--metrics-listen"); i >= 0 {
			n.Args = slices.Delete(slices.Clone(n.Args), i, i+2)
		}
		n.Args = append(slices.Clone(n.Args), "--metrics-listen", metrics[id])
		c.Restart(id)
		c.WaitCaughtUp(t, id, 2*time.Minute)
	}
	for _, id := range c.IDs() {
		c.Kill(id)
		restartWithMetrics(id)
	}
	adm := clusterAdmin(t, c)
	createRetentionTopic(t, ctx, adm, topic, partitions, map[string]string{
		"segment.bytes":   "1048576", // the smallest Kafka allows
		"retention.bytes": "1048576",
		"retention.ms":    "-1",
		// Rolls by age too: a node applying the same appends later (the
		// one that was down) must still roll where the leader did, by the
		// proposer's clock carried in each append.
		"segment.ms": "300",
	})
	c.WaitTopic(t, topic, partitions, 3, time.Minute)

	produce := func(round int) {
		t.Helper()
		cl := newClusterClient(t, c, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
		defer cl.Close()
		val := bytes.Repeat([]byte{'r'}, valueSize)
		recs := make([]*kgo.Record, 0, partitions*perRound)
		for i := range partitions * perRound {
			recs = append(recs, &kgo.Record{Partition: int32(i % partitions), Key: fmt.Appendf(nil, "%d-%d", round, i), Value: val})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", round, err)
		}
	}
	// startsAbove waits until the leader's log start offset of every
	// partition is above floor's and returns them.
	startsAbove := func(what string, floor map[int32]int64) map[int32]int64 {
		t.Helper()
		var got map[int32]int64
		var lastErr error
		testwait.For(t, what, time.Minute, func() bool {
			got, lastErr = leaderStartOffsets(ctx, adm, topic)
			if lastErr != nil || len(got) != partitions {
				return false
			}
			for p, off := range got {
				if off <= floor[p] {
					return false
				}
			}
			return true
		})
		t.Logf("%s: log start offsets %v", what, got)
		return got
	}

	produce(1)
	first := startsAbove("retention under the first leader", map[int32]int64{0: 0, 1: 0})

	old := c.LeaderID(t)
	c.Kill(old)
	killedAt := time.Now()
	next := c.WaitLeader(t, time.Minute)
	t.Logf("leader %d killed; node %d leads after %v", old, next, time.Since(killedAt).Round(time.Millisecond))
	produce(2)
	second := startsAbove("retention under the next leader", first)

	restartWithMetrics(old)

	// Every node's own view: the same start and end offsets everywhere,
	// and the start the leader answers ListOffsets with.
	var views map[int32]partitionOffsets
	var why string
	if !testwait.Until(time.Minute, func() bool {
		views, why = map[int32]partitionOffsets{}, ""
		for _, id := range c.IDs() {
			v, err := nodeOffsets(metrics[id], topic)
			if err != nil {
				why = fmt.Sprintf("node %d: %v", id, err)
				return false
			}
			if len(v.start) != partitions || len(v.end) != partitions {
				why = fmt.Sprintf("node %d reports %d/%d partitions", id, len(v.start), len(v.end))
				return false
			}
			views[id] = v
		}
		ref := views[c.IDs()[0]]
		for id, v := range views {
			for p := range int32(partitions) {
				if v.start[p] != ref.start[p] || v.end[p] != ref.end[p] {
					why = fmt.Sprintf("partition %d: node %d has [%d, %d), node %d [%d, %d)", p, id, v.start[p], v.end[p], c.IDs()[0], ref.start[p], ref.end[p])
					return false
				}
				if v.start[p] < second[p] {
					why = fmt.Sprintf("partition %d: node %d start %d below the leader's earlier %d", p, id, v.start[p], second[p])
					return false
				}
			}
		}
		// And the start the leader answers, in the same look: retention
		// may still be deleting (the leader's ListOffsets at 426 while the
		// nodes had just agreed on 300 failed a CI run).
		now, err := leaderStartOffsets(ctx, adm, topic)
		if err != nil {
			why = fmt.Sprintf("leader's log start offsets: %v", err)
			return false
		}
		for p, off := range now {
			if off != ref.start[p] {
				why = fmt.Sprintf("partition %d: leader answers log start %d, nodes report %d", p, off, ref.start[p])
				return false
			}
		}
		return true
	}) {
		t.Fatalf("nodes disagree on log offsets: %s (views %v)", why, views)
	}
	for id, v := range views {
		t.Logf("node %d: log start %v, log end %v", id, v.start, v.end)
	}
}

func createRetentionTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, partitions int, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	for attempt := 0; ; attempt++ {
		_, err := adm.CreateTopic(ctx, int32(partitions), 3, cfg, topic)
		switch {
		case err == nil, attempt > 0 && errors.Is(err, kerr.TopicAlreadyExists):
			return
		case ctx.Err() != nil || !retriable(err):
			t.Fatalf("create %s: %v", topic, err)
		}
		select { // a retry's pause, as createTopicErr's
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// leaderStartOffsets is ListOffsets(earliest), answered by the leader.
func leaderStartOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	listed, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var errs []error
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", o.Partition, o.Err))
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, errors.Join(errs...)
}

type partitionOffsets struct{ start, end map[int32]int64 }

// nodeOffsets reads one node's own log start and end offsets of topic's
// partitions from its /metrics at addr.
func nodeOffsets(addr, topic string) (partitionOffsets, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return partitionOffsets{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return partitionOffsets{}, err
	}
	v := partitionOffsets{start: map[int32]int64{}, end: map[int32]int64{}}
	for line := range strings.Lines(string(body)) {
		var into map[int32]int64
		switch {
		case strings.HasPrefix(line, "regent_partition_log_start_offset{"):
			into = v.start
		case strings.HasPrefix(line, "regent_partition_log_end_offset{"):
			into = v.end
		default:
			continue
		}
		if !strings.Contains(line, `topic="`+topic+`"`) {
			continue
		}
		p, val, err := partitionSample(line)
		if err != nil {
			return partitionOffsets{}, fmt.Errorf("%q: %w", line, err)
		}
		into[p] = val
	}
	return v, nil
}

var partitionLabelRE = regexp.MustCompile(`partition="(\d+)"`)

// partitionSample parses `name{...,partition="N",...} value`.
func partitionSample(line string) (int32, int64, error) {
	m := partitionLabelRE.FindStringSubmatch(line)
	i := strings.LastIndexByte(line, '}')
	if m == nil || i < 0 {
		return 0, 0, errors.New("no partition label")
	}
	p, err := strconv.ParseInt(m[1], 10, 32)
	if err != nil {
		return 0, 0, err
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64)
	if err != nil {
		return 0, 0, err
	}
	return int32(p), int64(f), nil
}
