package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetCommitInternalTopics: as Kafka does, a commit for a partition
// of __consumer_offsets or __transaction_state is stored (by name up to
// v9, by the id Metadata gives from v10) and fetched back; a partition
// past the topic's count is unknown; OffsetDelete takes them too.
func TestOffsetCommitInternalTopics(t *testing.T) {
	s := brokerServer(t, map[string]string{"offsets.topic.num.partitions": "5"})
	ids := map[string][16]byte{}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for _, mt := range call[*kmsg.MetadataResponse](t, s, md).Topics {
		if mt.Topic != nil {
			ids[*mt.Topic] = mt.TopicID
		}
	}
	for _, v := range []int16{2, 9, 10} {
		for _, name := range []string{offsetsTopic, txnStateTopic} {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation = v, "g-internal", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = name, ids[name]
			for _, p := range []int32{0, 4, 60} {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = p, int64(100+v)
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			resp := call[*kmsg.OffsetCommitResponse](t, s, req)
			ps := resp.Topics[0].Partitions
			code(t, name+" p0", ps[0].ErrorCode, nil)
			code(t, name+" p4", ps[1].ErrorCode, nil)
			code(t, name+" p60", ps[2].ErrorCode, kerr.UnknownTopicOrPartition)

			f := kmsg.NewPtrOffsetFetchRequest()
			f.Version = 10
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g-internal"
			ft := kmsg.NewOffsetFetchRequestGroupTopic()
			ft.TopicID, ft.Partitions = ids[name], []int32{4}
			g.Topics = append(g.Topics, ft)
			f.Groups = append(f.Groups, g)
			fr := call[*kmsg.OffsetFetchResponse](t, s, f)
			got := fr.Groups[0].Topics[0]
			if got.TopicID != ids[name] || got.Partitions[0].ErrorCode != 0 || got.Partitions[0].Offset != int64(100+v) {
				t.Fatalf("v%d %s: fetched %+v, want offset %d", v, name, got, 100+v)
			}
		}
	}
	d := kmsg.NewPtrOffsetDeleteRequest()
	d.Group = "g-internal"
	dt := kmsg.NewOffsetDeleteRequestTopic()
	dt.Topic = offsetsTopic
	dp := kmsg.NewOffsetDeleteRequestTopicPartition()
	dp.Partition = 4
	dt.Partitions = append(dt.Partitions, dp)
	d.Topics = append(d.Topics, dt)
	dr := call[*kmsg.OffsetDeleteResponse](t, s, d)
	code(t, "offset delete", dr.ErrorCode, nil)
	code(t, "offset delete p4", dr.Topics[0].Partitions[0].ErrorCode, nil)
}
