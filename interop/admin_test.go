package interop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/interop/brokertest"
)

func strp(s string) *string { return &s }

// TestTopicAdminThroughKadm drives the topic and config APIs with franz-go's
// admin client: configs validated and reported with sources and docs,
// LogAppendTime, timestamps, DeleteRecords, partitions, deletion.
func TestTopicAdminThroughKadm(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)

	// Unknown keys and bad values: INVALID_CONFIG naming the key.
	for cfg, want := range map[string]string{"no.such.key": "no.such.key", "retention.ms": "retention.ms", "cleanup.policy": "cleanup.policy"} {
		val := "abc"
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{cfg: &val}, "bad-"+strings.ReplaceAll(cfg, ".", "-"))
		if !errors.Is(err, kerr.InvalidConfig) && !errors.Is(resp.Err, kerr.InvalidConfig) {
			t.Fatalf("config %s=abc: err %v / %v, want INVALID_CONFIG", cfg, err, resp.Err)
		}
		if !strings.Contains(resp.ErrMessage, want) {
			t.Fatalf("config %s=abc: message %q does not name the key", cfg, resp.ErrMessage)
		}
	}
	// validateOnly creates nothing.
	vo := kmsg.NewPtrCreateTopicsRequest()
	vt := kmsg.NewCreateTopicsRequestTopic()
	vt.Topic, vt.NumPartitions, vt.ReplicationFactor = "validate-only", 3, 1
	vo.Topics, vo.ValidateOnly = []kmsg.CreateTopicsRequestTopic{vt}, true
	if r, err := vo.RequestWith(ctx, kc); err != nil || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("validateOnly: %v %+v", err, r)
	}
	if md, _ := adm.ListTopics(ctx); md.Has("validate-only") {
		t.Fatal("validateOnly created the topic")
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replication factor 3 on one node: %v", err)
	}

	// A topic with LogAppendTime and compaction settings.
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{
		"message.timestamp.type": strp("LogAppendTime"),
		"segment.bytes":          strp("1048576"),
		"retention.ms":           strp("-1"),
	}, "lat"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	before := time.Now().Add(-time.Second)
	old := time.Unix(1_000_000, 0)
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lat", Partition: 0, Value: []byte("x"), Timestamp: old}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	fetched := consumeAll(t, ctx, b.Addr, "lat", 1, 10)
	if len(fetched[0]) != 10 {
		t.Fatalf("fetched %d", len(fetched[0]))
	}
	ends, err := adm.ListOffsetsAfterMilli(ctx, before.UnixMilli(), "lat")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("lat", 0); o.Offset != 0 {
		t.Fatalf("LogAppendTime: first offset at or after %v is %d, want 0 (the producer's old timestamp must be replaced)", before, o.Offset)
	}

	// DescribeConfigs: the override is TOPIC_CONFIG, the rest defaults
	// with documentation.
	dr := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "lat"
	dr.Resources, dr.IncludeSynonyms, dr.IncludeDocumentation = []kmsg.DescribeConfigsRequestResource{res}, true, true
	dresp, err := dr.RequestWith(ctx, kc)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range dresp.Resources[0].Configs {
		found[c.Name] = c
	}
	if c := found["message.timestamp.type"]; c.Value == nil || *c.Value != "LogAppendTime" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("message.timestamp.type described as %+v", c)
	}
	if c := found["cleanup.policy"]; c.Value == nil || *c.Value != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig || c.Documentation == nil {
		t.Fatalf("cleanup.policy described as %+v", c)
	}
	if c := found["preallocate"]; c.Documentation == nil || !strings.Contains(*c.Documentation, "not enforce") {
		t.Fatalf("an unenforced key must say so in its documentation: %+v", c)
	}

	// Incremental alter: APPEND compact to cleanup.policy.
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "lat"
	ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	ic.Name, ic.Op, ic.Value = "cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, strp("compact")
	ir.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{ic}
	inc.Resources = []kmsg.IncrementalAlterConfigsRequestResource{ir}
	if r, err := inc.RequestWith(ctx, kc); err != nil || r.Resources[0].ErrorCode != 0 {
		t.Fatalf("incremental alter: %v %+v", err, r)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "lat")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := rc.On("lat", nil); true {
		for _, kv := range c.Configs {
			if kv.Key == "cleanup.policy" && kv.MaybeValue() != "delete,compact" {
				t.Fatalf("cleanup.policy after APPEND: %q", kv.MaybeValue())
			}
		}
	}

	// DeleteRecords moves the start offset; ListOffsets sees it.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "lat", Partition: 0, At: 4})
	if r, err := adm.DeleteRecords(ctx, os); err != nil || r.Error() != nil {
		t.Fatalf("delete records: %v %v", err, r.Error())
	}
	starts, _ := adm.ListStartOffsets(ctx, "lat")
	if o, _ := starts.Lookup("lat", 0); o.Offset != 4 {
		t.Fatalf("start offset after DeleteRecords: %d", o.Offset)
	}
	endsNow, _ := adm.ListEndOffsets(ctx, "lat")
	if o, _ := endsNow.Lookup("lat", 0); o.Offset != 10 {
		t.Fatalf("end offset: %d", o.Offset)
	}

	// Partitions grow; topics delete.
	if _, err := adm.UpdatePartitions(ctx, 5, "lat"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "lat")
	if err != nil || len(td["lat"].Partitions) != 5 {
		t.Fatalf("partitions after update: %v %v", err, td)
	}
	if r, err := adm.DeleteTopics(ctx, "lat"); err != nil || r.Error() != nil {
		t.Fatalf("delete topic: %v %v", err, r.Error())
	}
	if td, _ := adm.ListTopics(ctx); td.Has("lat") {
		t.Fatal("topic still listed after delete")
	}

	// The cluster and its log dir.
	if _, err := adm.DescribeBrokerConfigs(ctx); err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	if _, err := adm.DescribeAllLogDirs(ctx, nil); err != nil {
		t.Fatalf("describe log dirs: %v", err)
	}
}

// TestCleanStopAndRestart: SIGTERM stops the broker cleanly and the data is
// there after a restart.
func TestCleanStopAndRestart(t *testing.T) {
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "stop", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := b.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, b.LogTail(2000))
	}
	if !strings.Contains(b.LogTail(2000), "stopped") {
		t.Fatalf("no clean-stop log line:\n%s", b.LogTail(2000))
	}
	b.Restart()
	got := consumeAll(t, ctx, b.Addr, "stop", 1, 100)
	for i, v := range got[0] {
		if v[0] != byte(i) {
			t.Fatalf("record %d is %d", i, v[0])
		}
	}
}
