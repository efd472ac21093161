package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/quotas"
)

// TestMutationQuotaTakesOnlyWhatIsDone: a topic that fails for another
// reason (a bad config, one that exists) and a validate-only request take
// nothing from the client's controller_mutation_rate bucket; topics that
// are created do, until the bucket is negative.
func TestMutationQuotaTakesOnlyWhatIsDone(t *testing.T) {
	s := groupServer(t)
	qs, err := quotas.Open(quotas.Options{DataDir: t.TempDir(), Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(qs.Close)
	// 1 partition/s: a burst of 11 (the test client's id is "test").
	if _, err := qs.Alter([]quotas.Alteration{{Entity: quotas.Entity{HasClient: true, Client: "test"}, Ops: []quotas.Op{{Key: quotas.ControllerMutationRate, Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	s.SetQuotas(qs, quotas.NewEnforcer(quotas.EnforcerConfig{}, qs.Snapshot))
	create := func(validateOnly bool, name string, parts int32, configs ...string) *kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version, req.ValidateOnly = 7, validateOnly
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, -1
		for i := 0; i+1 < len(configs); i += 2 {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
		resp := call[*kmsg.CreateTopicsResponse](t, s, req)
		return &resp.Topics[0]
	}
	if rt := create(false, "bad", 10, "cleanup.policy", "bogus"); rt.ErrorCode == 0 {
		t.Fatal("a bad config was accepted")
	}
	if rt := create(true, "checked", 10); rt.ErrorCode != 0 {
		t.Fatalf("validate only: %d", rt.ErrorCode)
	}
	if rt := create(false, "first", 10); rt.ErrorCode != 0 {
		t.Fatalf("first: %d", rt.ErrorCode)
	}
	if rt := create(false, "first", 10); rt.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("again: %d, want TOPIC_ALREADY_EXISTS", rt.ErrorCode)
	}
	// 1 token left (plus what refilled): this one takes the bucket
	// negative and is still created; the next is refused.
	if rt := create(false, "second", 5); rt.ErrorCode != 0 {
		t.Fatalf("second: %d (the failures took tokens)", rt.ErrorCode)
	}
	if rt := create(false, "third", 1); rt.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("third: %d, want THROTTLING_QUOTA_EXCEEDED", rt.ErrorCode)
	}
}
