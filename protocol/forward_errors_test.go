package protocol

import (
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

// TestErrorResponseIsAnError: the answer to a handler that panicked
// carries UNKNOWN_SERVER_ERROR wherever the response kind has a top-level
// error code (EndTxn, InitProducerId, Heartbeat...: an all-zero answer
// would read as success), and encodes at every served version.
func TestErrorResponseIsAnError(t *testing.T) {
	withCode := 0
	for key := range int16(100) {
		lo, hi, ok := VersionRange(key)
		if !ok {
			continue
		}
		for v := lo; v <= hi; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			resp := errorResponse(&Request{Msg: req}, "boom")
			resp.SetVersion(v)
			_ = resp.AppendTo(nil)
			f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
			if !f.IsValid() {
				continue
			}
			withCode++
			if f.Int() != int64(kerr.UnknownServerError.Code) {
				t.Errorf("%s v%d: error code %d, want UNKNOWN_SERVER_ERROR", kmsg.NameForKey(key), v, f.Int())
			}
		}
	}
	if withCode == 0 {
		t.Fatal("no served response kind has a top-level error code")
	}
}
