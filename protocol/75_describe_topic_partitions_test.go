package protocol

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/topics"
)

func TestPageTopicPartitions(t *testing.T) {
	counts := map[string]int32{"a": 2, "b": 3, "c": 0, "d": 4}
	count := func(n string) (int32, bool) { c, ok := counts[n]; return c, ok }
	for _, tc := range []struct {
		name        string
		sorted      []string
		cursor      string
		first       int32
		limit       int32
		want        string
		wantNext    string
		wantNextSet bool
	}{
		{"everything", []string{"a", "b", "c", "d"}, "", 0, 100, "a[0,2) b[0,3) c[0,0) d[0,4)", "", false},
		{"cut inside a topic", []string{"a", "b", "d"}, "", 0, 4, "a[0,2) b[0,2)", "b/2", true},
		{"full at a topic's end", []string{"a", "b", "d"}, "", 0, 5, "a[0,2) b[0,3)", "d/0", true},
		{"full at the last topic's end", []string{"a", "b"}, "", 0, 5, "a[0,2) b[0,3)", "", false},
		{"from the cursor", []string{"b", "d"}, "b", 2, 3, "b[2,3) d[0,2)", "d/2", true},
		{"cursor past the end", []string{"b", "d"}, "b", 9, 3, "b[3,3) d[0,3)", "d/3", true},
		{"missing topics take no room", []string{"a", "x", "b"}, "", 0, 3, "a[0,2) x? b[0,1)", "b/1", true},
		{"zero limit", []string{"a"}, "", 0, 0, "", "a/0", true},
		{"negative limit", []string{"a"}, "", 0, -1, "", "", false},
	} {
		spans, next := pageTopicPartitions(tc.sorted, count, tc.cursor, tc.first, tc.limit)
		got := ""
		for _, sp := range spans {
			if got != "" {
				got += " "
			}
			if sp.missing {
				got += sp.topic + "?"
			} else {
				got += fmt.Sprintf("%s[%d,%d)", sp.topic, sp.from, sp.to)
			}
		}
		if got != tc.want {
			t.Errorf("%s: spans %q, want %q", tc.name, got, tc.want)
		}
		if (next != nil) != tc.wantNextSet || (next != nil && fmt.Sprintf("%s/%d", next.topic, next.partition) != tc.wantNext) {
			t.Errorf("%s: next %+v, want %q", tc.name, next, tc.wantNext)
		}
	}
}

func describeTP(t *testing.T, s *Server, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, names ...string) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, n := range names {
		req.Topics = append(req.Topics, kmsg.DescribeTopicPartitionsRequestTopic{Topic: n})
	}
	return call[*kmsg.DescribeTopicPartitionsResponse](t, s, req)
}

func TestDescribeTopicPartitionsPages(t *testing.T) {
	s := brokerServer(t, nil)
	if _, err := s.topics.Create(topics.CreateSpec{Name: "big", Partitions: 45, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	// Every topic: __consumer_offsets (50), __transaction_state (50), big
	// (45), t (3), in pages of at most 40.
	seen := map[string]map[int32]bool{}
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	pages := 0
	for ; pages < 20; pages++ {
		resp := describeTP(t, s, 40, cursor)
		n := 0
		for _, tp := range resp.Topics {
			code(t, "topic "+*tp.Topic, tp.ErrorCode, nil)
			if tp.IsInternal != isInternalTopic(*tp.Topic) || tp.TopicID == ([16]byte{}) {
				t.Fatalf("%s: internal %v id %x", *tp.Topic, tp.IsInternal, tp.TopicID)
			}
			if tp.AuthorizedOperations != topicOperations {
				t.Fatalf("%s: authorized operations %b", *tp.Topic, tp.AuthorizedOperations)
			}
			if seen[*tp.Topic] == nil {
				seen[*tp.Topic] = map[int32]bool{}
			}
			for _, p := range tp.Partitions {
				if seen[*tp.Topic][p.Partition] {
					t.Fatalf("%s/%d described twice", *tp.Topic, p.Partition)
				}
				if p.LeaderID != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.EligibleLeaderReplicas == nil {
					t.Fatalf("%s/%d: %+v", *tp.Topic, p.Partition, p)
				}
				seen[*tp.Topic][p.Partition] = true
				n++
			}
		}
		if n > 40 {
			t.Fatalf("page of %d partitions, limit 40", n)
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	for name, want := range map[string]int{offsetsTopic: 50, txnStateTopic: 50, "big": 45, "t": 3} {
		if len(seen[name]) != want {
			t.Fatalf("%s: %d partitions described over %d pages, want %d", name, len(seen[name]), pages+1, want)
		}
	}
	if pages+1 != 4 { // 148 partitions in pages of 40
		t.Fatalf("%d pages, want 4", pages+1)
	}

	// Named: sorted, unknown and invalid names answered, the cursor's
	// topic must be named.
	resp := describeTP(t, s, 2000, nil, "t", "nope", "bad/name", offsetsTopic)
	want := []struct {
		name string
		code *kerr.Error
	}{{"__consumer_offsets", nil}, {"bad/name", kerr.InvalidTopicException}, {"nope", kerr.UnknownTopicOrPartition}, {"t", nil}}
	if len(resp.Topics) != len(want) {
		t.Fatalf("named: %d topics", len(resp.Topics))
	}
	for i, w := range want {
		if *resp.Topics[i].Topic != w.name {
			t.Fatalf("named topic %d is %s, want %s", i, *resp.Topics[i].Topic, w.name)
		}
		code(t, w.name, resp.Topics[i].ErrorCode, w.code)
	}
	resp = describeTP(t, s, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "big", Partition: 1}, "t")
	if len(resp.Topics) != 1 {
		t.Fatalf("cursor not named: %+v", resp.Topics)
	}
	code(t, "cursor not named", resp.Topics[0].ErrorCode, kerr.InvalidRequest)
	resp = describeTP(t, s, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "big", Partition: 40}, "t", "big", offsetsTopic)
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 5 || resp.Topics[0].Partitions[0].Partition != 40 || *resp.Topics[1].Topic != "t" {
		t.Fatalf("named from a cursor: %+v", resp.Topics)
	}
}

func TestDescribeTopicPartitionsAuthorization(t *testing.T) {
	var allowAll atomic.Bool
	s, store, obs := aclServer(t, &allowAll)
	if err := store.Create([]acls.ACL{anon(acls.Topic, acls.Literal, "t", acls.Describe, acls.Allow)}); err != nil {
		t.Fatal(err)
	}
	resp := describeTP(t, s, 2000, nil)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "t" || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("listing: %+v", resp.Topics)
	}
	if ops := resp.Topics[0].AuthorizedOperations; ops != 1<<8 {
		t.Fatalf("authorized operations %b, want DESCRIBE only", ops)
	}
	if obs.count("DESCRIBE/TOPIC") != 0 {
		t.Fatal("a listing reported denials")
	}
	resp = describeTP(t, s, 2000, nil, offsetsTopic, "t")
	if len(resp.Topics) != 2 || *resp.Topics[0].Topic != "t" || *resp.Topics[1].Topic != offsetsTopic {
		t.Fatalf("named: %+v", resp.Topics)
	}
	code(t, "denied", resp.Topics[1].ErrorCode, kerr.TopicAuthorizationFailed)
	if resp.Topics[1].TopicID != ([16]byte{}) || len(resp.Topics[1].Partitions) != 0 {
		t.Fatalf("denied topic discloses %+v", resp.Topics[1])
	}
	if obs.count("DESCRIBE/TOPIC") != 1 {
		t.Fatalf("denials %v, want one", obs.n)
	}
}
