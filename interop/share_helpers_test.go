package interop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// shareBrokerConfig lowers the broker's bounds on the share-group timeouts
// so that a test group may expire a killed member and time out its
// acquisition locks in seconds rather than Kafka's 45 s and 15 s minimums.
const shareBrokerConfig = "group.share.min.session.timeout.ms=1000,group.share.min.heartbeat.interval.ms=100," +
	"group.share.min.record.lock.duration.ms=1000"

// shareAdvertised reports whether the broker at addr advertises share
// groups as the clients need them (ShareGroupHeartbeat, ShareFetch v2 and
// ShareAcknowledge v2: kgo's and Kafka 4.3's Java client's condition), and
// if not, what it advertises instead.
func shareAdvertised(t testing.TB, addr string) (bool, string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	v := kversion.FromApiVersionsResponse(resp)
	hb, hbOK := v.LookupMaxKeyVersion(76)
	sf, sfOK := v.LookupMaxKeyVersion(78)
	sa, saOK := v.LookupMaxKeyVersion(79)
	if hbOK && sfOK && sf >= 2 && saOK && sa >= 2 {
		return true, ""
	}
	vers := func(ok bool, n int16) string {
		if !ok {
			return "none"
		}
		return fmt.Sprintf("v%d", n)
	}
	return false, fmt.Sprintf("ShareGroupHeartbeat %s, ShareFetch %s, ShareAcknowledge %s advertised; share groups need ShareFetch and ShareAcknowledge v2",
		vers(hbOK, hb), vers(sfOK, sf), vers(saOK, sa))
}

// requireShareGroups skips the test while the broker does not advertise
// share groups, so the suite stays green until the feature lands.
func requireShareGroups(t testing.TB, addr string) {
	t.Helper()
	if ok, why := shareAdvertised(t, addr); !ok {
		t.Skipf("share groups not served yet: %s", why)
	}
}

// setShareGroupConfigs sets GROUP config overrides through
// IncrementalAlterConfigs, as kafka-configs --entity-type groups does.
func setShareGroupConfigs(t testing.TB, ctx context.Context, cl *kgo.Client, group string, kv map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for k, v := range kv {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs on group %s: %v", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("IncrementalAlterConfigs on group %s: %v (%s)", group, err, deref(r.ErrorMessage))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// shareGroupMembers describes a share group with ShareGroupDescribe and
// returns its state and its members' client ids (an error for any error
// code, GROUP_ID_NOT_FOUND included).
func shareGroupMembers(ctx context.Context, cl *kgo.Client, group string) (string, []string, error) {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", nil, err
	}
	if len(resp.Groups) != 1 {
		return "", nil, fmt.Errorf("ShareGroupDescribe: %d groups in the response", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return "", nil, fmt.Errorf("ShareGroupDescribe %s: %w (%s)", group, err, deref(g.ErrorMessage))
	}
	var ids []string
	for _, m := range g.Members {
		ids = append(ids, m.ClientID)
	}
	return g.GroupState, ids, nil
}

// shareOffset is one partition's DescribeShareGroupOffsets answer.
type shareOffset struct {
	Start int64 // the share-partition start offset (SPSO); -1 when not initialised
	Lag   int64 // records not yet acknowledged or archived; -1 when unknown
}

// shareSettled reports whether every partition in hwm has nothing left to
// deliver: lag 0, or the start offset at the end of the log. (Kafka 4.3
// answers lag 0 with the start offset where the share-partition was
// initialised, moving it only later; either answer means no record of the
// partition can be delivered again.)
func shareSettled(so map[int32]shareOffset, hwm map[int32]int64) bool {
	for p, end := range hwm {
		o, ok := so[p]
		if !ok || !(o.Lag == 0 || o.Start == end) {
			return false
		}
	}
	return true
}

// shareStartOffsets asks DescribeShareGroupOffsets for the start offsets
// and lags of a group's partitions of topic.
func shareStartOffsets(ctx context.Context, cl *kgo.Client, group, topic string, partitions []int32) (map[int32]shareOffset, error) {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	tp := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	tp.Topic, tp.Partitions = topic, partitions
	g.Topics = append(g.Topics, tp)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]shareOffset{}
	for _, rg := range resp.Groups {
		if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
			return nil, fmt.Errorf("DescribeShareGroupOffsets %s: %w (%s)", group, err, deref(rg.ErrorMessage))
		}
		for _, rt := range rg.Topics {
			for _, p := range rt.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("DescribeShareGroupOffsets %s %s[%d]: %w (%s)", group, rt.Topic, p.Partition, err, deref(p.ErrorMessage))
				}
				out[p.Partition] = shareOffset{p.StartOffset, p.Lag}
			}
		}
	}
	return out, nil
}
