package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/quotas"
)

// BenchmarkThrottleFetchNoQuota: what a 24-partition fetch pays for quotas
// when none is set (the common case).
func BenchmarkThrottleFetchNoQuota(b *testing.B) {
	qs, err := quotas.Open(quotas.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(qs.Close)
	s := &Server{}
	s.SetQuotas(qs, quotas.NewEnforcer(quotas.EnforcerConfig{}, qs.Snapshot))
	resp := kmsg.NewPtrFetchResponse()
	for t := range 4 {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "topic-" + string(rune('a'+t))
		for p := range 6 {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(p)
			rp.RecordBatches = make([]byte, 16<<10)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	r := &Request{Header: Header{Key: 1, Version: 12, ClientID: "consumer-1"}, Msg: kmsg.NewPtrFetchRequest(), Conn: &ConnInfo{}}
	b.ReportAllocs()
	for b.Loop() {
		s.throttleFetch(r, resp, nil)
	}
}
