package protocol

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/quotas"
)

// TestClientQuotasAuthorization: AlterClientQuotas needs ALTER_CONFIGS on
// the cluster (every entry CLUSTER_AUTHORIZATION_FAILED without it) and
// DescribeClientQuotas DESCRIBE_CONFIGS, which ALTER_CONFIGS implies.
func TestClientQuotasAuthorization(t *testing.T) {
	var allowAll atomic.Bool
	s, store, _ := aclServer(t, &allowAll)
	qs, err := quotas.Open(quotas.Options{DataDir: t.TempDir(), Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(qs.Close)
	s.SetQuotas(qs, quotas.NewEnforcer(quotas.EnforcerConfig{}, qs.Snapshot))

	alter := kmsg.NewPtrAlterClientQuotasRequest()
	alter.Version = 1
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "client-id", kmsg.StringPtr("app")
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "producer_byte_rate", 1024
	e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
	alter.Entries = append(alter.Entries, e, e)
	describe := kmsg.NewPtrDescribeClientQuotasRequest()
	describe.Version = 1

	resp := call[*kmsg.AlterClientQuotasResponse](t, s, alter)
	for _, re := range resp.Entries {
		if re.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(re.Entity) != 1 || *re.Entity[0].Name != "app" {
			t.Fatalf("alter without ALTER_CONFIGS: %+v", resp.Entries)
		}
	}
	if d := call[*kmsg.DescribeClientQuotasResponse](t, s, describe); d.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("describe without DESCRIBE_CONFIGS: %d", d.ErrorCode)
	}
	if qs.Snapshot().Len() != 0 {
		t.Fatal("a refused alter changed the quotas")
	}
	if err := store.Create([]acls.ACL{anon(acls.Cluster, acls.Literal, acls.ClusterName, acls.AlterConfigs, acls.Allow)}); err != nil {
		t.Fatal(err)
	}
	resp = call[*kmsg.AlterClientQuotasResponse](t, s, alter)
	if len(resp.Entries) != 2 || resp.Entries[0].ErrorCode != 0 || resp.Entries[1].ErrorCode != 0 {
		t.Fatalf("alter with ALTER_CONFIGS: %+v", resp.Entries)
	}
	d := call[*kmsg.DescribeClientQuotasResponse](t, s, describe)
	if d.ErrorCode != 0 || len(d.Entries) != 1 || d.Entries[0].Values[0].Value != 1024 {
		t.Fatalf("describe with ALTER_CONFIGS: %+v", d)
	}
}

// TestThrottleProduceMutes: a produce past its client's quota gets the
// throttle in its response and mutes its connection for that long.
func TestThrottleProduceMutes(t *testing.T) {
	s := groupServer(t)
	qs, err := quotas.Open(quotas.Options{DataDir: t.TempDir(), Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(qs.Close)
	if _, err := qs.Alter([]quotas.Alteration{{Entity: quotas.Entity{HasClient: true, Client: "test"}, Ops: []quotas.Op{{Key: quotas.ProducerByteRate, Value: 1000}}}}); err != nil {
		t.Fatal(err)
	}
	s.SetQuotas(qs, quotas.NewEnforcer(quotas.EnforcerConfig{}, qs.Snapshot))
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	tp := kmsg.NewProduceRequestTopic()
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = make([]byte, 20000) // 2000/s over 10 s against 1000/s: 10 s
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	r := &Request{Header: Header{Key: 0, Version: 7, ClientID: "test"}, Msg: req, Conn: &ConnInfo{}}
	before := time.Now()
	s.throttleProduce(r, req, resp)
	if resp.ThrottleMillis != 10000 {
		t.Fatalf("throttle %d ms, want 10000", resp.ThrottleMillis)
	}
	if until := time.Unix(0, r.Conn.Mute.Until()); until.Before(before.Add(10*time.Second)) || until.After(time.Now().Add(10*time.Second)) {
		t.Fatalf("muted until %v, want 10 s from now", until)
	}
	// Another client id has no quota.
	r2 := &Request{Header: Header{Key: 0, Version: 7, ClientID: "other"}, Msg: req, Conn: &ConnInfo{}}
	resp2 := req.ResponseKind().(*kmsg.ProduceResponse)
	s.throttleProduce(r2, req, resp2)
	if resp2.ThrottleMillis != 0 || r2.Conn.Mute.Until() != 0 {
		t.Fatalf("unlimited client throttled %d", resp2.ThrottleMillis)
	}
}
