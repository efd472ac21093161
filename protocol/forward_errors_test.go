package protocol

import (
	"fmt"
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
	for key := range forwardedKeys {
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
			if len(codes) == 0 && key != 34 && key != 51 { // see itemLists
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
