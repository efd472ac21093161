// Command e2eprobe measures end-to-end latency the way Kafka's
// EndToEndLatency does (one record at a time: produce with acks=all and
// linger 0, wait for the ack, then poll until a consumer has it; with
// -commit, commit after each record, untimed) and prints every slow record
// with wall-clock stamps of its send, ack and receipt, so a spike can be
// lined up with the broker's log (gctrace, fsyncs) or traces. It separates
// the broker's share of the latency from the Java client's: against the
// same broker at the same moment, compare its percentiles with
// EndToEndLatency's. Unlike that tool's consumer, franz-go's fetches in
// the background, so a record may be in the client before the ack is.
//
//	go run ./bench/e2eprobe -broker 127.0.0.1:9092 -topic e2e -n 10000 -slow 3ms -commit
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func main() {
	broker := flag.String("broker", "127.0.0.1:9092", "bootstrap broker")
	topic := flag.String("topic", "e2e", "topic (one partition, existing)")
	n := flag.Int("n", 10000, "records")
	size := flag.Int("size", 1024, "record size in bytes")
	slow := flag.Duration("slow", 3*time.Millisecond, "print records slower than this")
	fetchWait := flag.Duration("fetch-wait", 10*time.Millisecond, "the consumer's fetch max wait (EndToEndLatency sets fetch.max.wait.ms=0, answered at once; franz-go allows 10 ms at least)")
	commit := flag.Bool("commit", false, "commit the consumed offset after each record, untimed (as EndToEndLatency's commitSync)")
	flag.Parse()
	if err := run(*broker, *topic, *n, *size, *slow, *fetchWait, *commit); err != nil {
		fmt.Fprintln(os.Stderr, "e2eprobe:", err)
		os.Exit(1)
	}
}

func run(broker, topic string, n, size int, slow, fetchWait time.Duration, commit bool) error {
	ctx := context.Background()
	prod, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer prod.Close()
	// The consumer starts at a warm-up record, which it reads before the
	// measure: a consumer starting "at the end" may resolve the end after
	// the first measured record, and then wait for it forever.
	warm, err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("warm")}).First()
	if err != nil {
		return fmt.Errorf("warm-up produce: %w", err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(broker),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {warm.Partition: kgo.NewOffset().At(warm.Offset)}}),
		kgo.FetchMaxWait(fetchWait), kgo.MaxVersions(commitByName()))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer cons.Close()
	for warmed := false; !warmed; {
		fs := cons.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			return fmt.Errorf("warm-up fetch: %w", errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) { warmed = warmed || r.Offset == warm.Offset })
	}
	value := make([]byte, size)
	lat := make([]time.Duration, 0, n)
	acks := make([]time.Duration, 0, n)
	for i := range n {
		sent := time.Now()
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			return fmt.Errorf("produce %d: %w", i, err)
		}
		acked := time.Now()
		got, next := false, int64(0)
		for !got {
			fs := cons.PollFetches(ctx)
			if errs := fs.Errors(); len(errs) > 0 {
				return fmt.Errorf("fetch: %v", errs[0].Err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) == size {
					got, next = true, r.Offset+1
				}
			})
		}
		done := time.Now()
		lat = append(lat, done.Sub(sent))
		acks = append(acks, acked.Sub(sent))
		if commit {
			if err := commitOffset(ctx, cons, topic, next); err != nil {
				return err
			}
		}
		if done.Sub(sent) > slow {
			fmt.Printf("slow %d sent %s ack +%.2fms recv +%.2fms\n", i, sent.UTC().Format("15:04:05.000000"), ms(acked.Sub(sent)), ms(done.Sub(acked)))
		}
	}
	report("e2e", lat)
	report("ack", acks)
	return nil
}

// commitByName caps OffsetCommit below v10, which names topics by id.
func commitByName() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(8, 9)
	return v
}

// commitOffset commits offset for partition 0 of topic in the group
// "e2eprobe", as a consumer outside the group's generations does.
func commitOffset(ctx context.Context, cl *kgo.Client, topic string, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "e2eprobe", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("offset commit: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("offset commit: %w", err)
			}
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func report(name string, d []time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 { return ms(s[int(p*float64(len(s)-1))]) }
	fmt.Printf("%s: n %d avg %.3f p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms\n", name, len(s), ms(sum/time.Duration(len(s))), q(0.5), q(0.99), q(0.999), q(1))
}
