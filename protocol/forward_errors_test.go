package protocol

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFailedResponseCoversForwardedKeys: for every key a follower
// forwards, a failed forward answers the request's items with the error,
// at every version served: a response without it would tell the client
// the change was made (an empty AlterClientQuotas answer, a
// CreateDelegationToken answer with error code 0).
func TestFailedResponseCoversForwardedKeys(t *testing.T) {
	code := kerr.RequestTimedOut.Code
	keys := maps.Clone(forwardedKeys)
	maps.Copy(keys, leaderReadKeys)
	for key := range keys {
		lo, hi, ok := VersionRange(key)
		if !ok {
			t.Fatalf("key %d is forwarded but not served", key)
		}
		for v := lo; v <= hi; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			fillOne(reflect.ValueOf(req).Elem(), 0)
			resp := failedResponse(req, code, "leader unreachable")
			var codes []int16
			errorCodes(reflect.ValueOf(resp).Elem(), &codes)
			if len(codes) == 0 {
				t.Errorf("%s v%d: the failed forward's answer carries no error code: %+v", kmsg.NameForKey(key), v, resp)
			}
			for _, c := range codes {
				if c != code {
					t.Errorf("%s v%d: error code %d in the failed forward's answer, want %d", kmsg.NameForKey(key), v, c, code)
				}
			}
		}
	}
}

// fillOne gives every list in v one element (a string "x", a number 0,
// a struct filled the same way) and every nullable string a value, so a
// request names one item of each kind.
func fillOne(v reflect.Value, depth int) {
	if depth > 4 {
		return
	}
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() || v.Type().Field(i).Name == "UnknownTags" {
			continue
		}
		switch f.Kind() {
		case reflect.Slice:
			elem := reflect.New(f.Type().Elem()).Elem()
			switch elem.Kind() {
			case reflect.Struct:
				fillOne(elem, depth+1)
			case reflect.String:
				elem.SetString("x")
			case reflect.Uint8:
				continue // bytes, not a list
			}
			f.Set(reflect.Append(f, elem))
		case reflect.Pointer:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.ValueOf(kmsg.StringPtr("x")))
			}
		case reflect.String:
			if f.String() == "" {
				f.SetString("x")
			}
		}
	}
}

// errorCodes collects every ErrorCode field in v, nested lists included.
func errorCodes(v reflect.Value, out *[]int16) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 {
				*out = append(*out, int16(v.Field(i).Int()))
				continue
			}
			errorCodes(v.Field(i), out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			errorCodes(v.Index(i), out)
		}
	}
}

// TestErrorResponseIsAnError: the answer to a handler that panicked, for
// a request of every served key and version with every field set (one
// item per list), carries UNKNOWN_SERVER_ERROR in every error code it has
// (an all-zero EndTxn or Heartbeat answer would read as success), has an
// item for each item asked where the kinds share the list (a Produce
// answer without its partitions leaves the batches unanswered), and
// encodes.
func TestErrorResponseIsAnError(t *testing.T) {
	batch := []byte("not read")
	var none []string
	for _, key := range ServedKeys() {
		lo, hi, _ := VersionRange(key)
		for v := lo; v <= hi; v++ {
			req := newRequest(key, v)
			fill(reflect.ValueOf(req).Elem(), batch, 0)
			resp := errorResponse(&Request{Msg: req}, "boom")
			resp.SetVersion(v)
			_ = resp.AppendTo(nil)
			var codes []int16
			errorCodes(reflect.ValueOf(resp).Elem(), &codes)
			if len(codes) == 0 {
				none = append(none, fmt.Sprintf("%s v%d", kmsg.NameForKey(key), v))
			}
			for _, c := range codes {
				if c != kerr.UnknownServerError.Code {
					t.Errorf("%s v%d: error code %d, want UNKNOWN_SERVER_ERROR", kmsg.NameForKey(key), v, c)
				}
			}
		}
	}
	if len(none) > 0 {
		t.Errorf("answers with no error code at all: %v", none)
	}
	// The items: a Produce answer names the partition asked, in error.
	req := kmsg.NewPtrProduceRequest()
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for p := range int32(3) {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := errorResponse(&Request{Msg: req}, "boom").(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "t" || len(resp.Topics[0].Partitions) != 3 || resp.Topics[0].Partitions[2].Partition != 2 ||
		resp.Topics[0].Partitions[2].ErrorCode != kerr.UnknownServerError.Code || resp.Topics[0].Partitions[2].BaseOffset != -1 {
		t.Fatalf("produce answer %+v", resp.Topics)
	}
}

// TestFailedResponseNamesItems: a failed forward's answer names the
// items as the request did, where the request's list differs by version
// or in shape.
func TestFailedResponseNamesItems(t *testing.T) {
	code := kerr.RequestTimedOut.Code
	// DeleteTopics up to v5 names topics in TopicNames, later in Topics.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(4)
	del.TopicNames = []string{"a", "b"}
	dr := failedResponse(del, code, "x").(*kmsg.DeleteTopicsResponse)
	if len(dr.Topics) != 2 || dr.Topics[0].Topic == nil || *dr.Topics[0].Topic != "a" || *dr.Topics[1].Topic != "b" || dr.Topics[1].ErrorCode != code {
		t.Errorf("DeleteTopics v4 answer: %+v", dr.Topics)
	}
	// DeleteRecords: no low watermark known.
	recs := kmsg.NewPtrDeleteRecordsRequest()
	recs.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "t", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 3, Offset: 10}}}}
	rr := failedResponse(recs, code, "x").(*kmsg.DeleteRecordsResponse)
	if p := rr.Topics[0].Partitions[0]; p.Partition != 3 || p.LowWatermark != -1 || p.ErrorCode != code {
		t.Errorf("DeleteRecords answer: %+v", p)
	}
	// AlterClientQuotas: each entry answered with its entity.
	q := kmsg.NewPtrAlterClientQuotasRequest()
	name := "alice"
	q.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: &name}}}}
	qr := failedResponse(q, code, "x").(*kmsg.AlterClientQuotasResponse)
	if len(qr.Entries) != 1 || len(qr.Entries[0].Entity) != 1 || qr.Entries[0].Entity[0].Type != "user" || *qr.Entries[0].Entity[0].Name != "alice" || qr.Entries[0].ErrorCode != code {
		t.Errorf("AlterClientQuotas answer: %+v", qr.Entries)
	}
	// AlterReplicaLogDirs: partitions asked by dir, answered by topic.
	ld := kmsg.NewPtrAlterReplicaLogDirsRequest()
	ld.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{
		{Dir: "/a", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "t", Partitions: []int32{0}}, {Topic: "u", Partitions: []int32{1}}}},
		{Dir: "/b", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "t", Partitions: []int32{2}}}},
	}
	lr := failedResponse(ld, code, "x").(*kmsg.AlterReplicaLogDirsResponse)
	if len(lr.Topics) != 2 || lr.Topics[0].Topic != "t" || len(lr.Topics[0].Partitions) != 2 || lr.Topics[0].Partitions[1].Partition != 2 ||
		lr.Topics[1].Topic != "u" || lr.Topics[1].Partitions[0].ErrorCode != code {
		t.Errorf("AlterReplicaLogDirs answer: %+v", lr.Topics)
	}
	// CreateTopics: the topic named, its error and message.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 3, ReplicationFactor: 1}}
	cr := failedResponse(ct, code, "leader unreachable").(*kmsg.CreateTopicsResponse)
	if len(cr.Topics) != 1 || cr.Topics[0].Topic != "new" || cr.Topics[0].NumPartitions != -1 || cr.Topics[0].ReplicationFactor != -1 || cr.Topics[0].ErrorCode != code || cr.Topics[0].ErrorMessage == nil || *cr.Topics[0].ErrorMessage != "leader unreachable" {
		t.Errorf("CreateTopics answer: %+v", cr.Topics)
	}
}
