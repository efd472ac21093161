package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/groupconfig"
)

// TestGroupConfigsDescribeAlterList: a group's configs are described
// whether or not the group exists (every key, defaults marked), altered
// incrementally (SET, DELETE; APPEND refused; bounds refused with Kafka's
// message, validate_only changes nothing), and the group is listed by
// ListConfigResources while it has overrides.
func TestGroupConfigsDescribeAlterList(t *testing.T) {
	s := brokerServer(t, nil)
	store, err := groupconfig.Open(groupconfig.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s.SetGroupConfigs(store)
	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
		req.Resources = append(req.Resources, rr)
		resp := call[*kmsg.DescribeConfigsResponse](t, s, req)
		code(t, "describe", resp.Resources[0].ErrorCode, nil)
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	got := describe()
	if len(got) != len(groupconfig.Defs) {
		t.Fatalf("described %d keys, want %d", len(got), len(groupconfig.Defs))
	}
	if c := got["consumer.session.timeout.ms"]; *c.Value != "45000" || c.Source != kmsg.ConfigSourceDefaultConfig || c.ConfigType != kmsg.ConfigTypeInt {
		t.Fatalf("default: %+v", c)
	}
	alter := func(validateOnly bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsResponseResource {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeGroupConfig, "g", ops
		req.Resources = append(req.Resources, rr)
		return call[*kmsg.IncrementalAlterConfigsResponse](t, s, req).Resources[0]
	}
	set := func(k, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, &v, kmsg.IncrementalAlterConfigOpSet
		return c
	}
	r := alter(false, set("consumer.session.timeout.ms", "70000"))
	code(t, "above the max", r.ErrorCode, kerr.InvalidConfig)
	if r.ErrorMessage == nil || *r.ErrorMessage != "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms" {
		t.Fatalf("message %v", r.ErrorMessage)
	}
	code(t, "validate only", alter(true, set("consumer.session.timeout.ms", "50000")).ErrorCode, nil)
	if len(store.Groups()) != 0 {
		t.Fatalf("validate_only stored %v", store.Groups())
	}
	code(t, "set", alter(false, set("consumer.session.timeout.ms", "50000"), set("share.isolation.level", "read_committed")).ErrorCode, nil)
	app := set("share.isolation.level", "read_committed")
	app.Op = kmsg.IncrementalAlterConfigOpAppend
	code(t, "append", alter(false, app).ErrorCode, kerr.InvalidConfig)
	got = describe()
	if c := got["consumer.session.timeout.ms"]; *c.Value != "50000" || c.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("override: %+v", c)
	}
	lr := kmsg.NewPtrListConfigResourcesRequest()
	lr.Version = 1
	lr.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeGroupConfig)}
	if res := call[*kmsg.ListConfigResourcesResponse](t, s, lr).ConfigResources; len(res) != 1 || res[0].Name != "g" {
		t.Fatalf("listed %+v", res)
	}
	del := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	del.Name, del.Op = "consumer.session.timeout.ms", kmsg.IncrementalAlterConfigOpDelete
	del2 := del
	del2.Name = "share.isolation.level"
	code(t, "delete", alter(false, del, del2).ErrorCode, nil)
	if res := call[*kmsg.ListConfigResourcesResponse](t, s, lr).ConfigResources; len(res) != 0 {
		t.Fatalf("listed after delete %+v", res)
	}

	// Legacy AlterConfigs replaces the whole set.
	legacy := func(cfg map[string]string) kmsg.AlterConfigsResponseResource {
		req := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
		for k, v := range cfg {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		return call[*kmsg.AlterConfigsResponse](t, s, req).Resources[0]
	}
	code(t, "legacy set", legacy(map[string]string{"consumer.session.timeout.ms": "55000", "share.delivery.count.limit": "3"}).ErrorCode, nil)
	code(t, "legacy replace", legacy(map[string]string{"share.delivery.count.limit": "4"}).ErrorCode, nil)
	if got := store.Overrides("g"); len(got) != 1 || got["share.delivery.count.limit"] != "4" {
		t.Fatalf("after legacy replace: %v", got)
	}
	code(t, "legacy unknown", legacy(map[string]string{"nope": "1"}).ErrorCode, kerr.InvalidConfig)
}
