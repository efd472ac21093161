package protocol

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorResponse is the answer to a handler that failed unexpectedly (it
// panicked, or its response could not be framed): a response of the
// request's kind in which every error code is UNKNOWN_SERVER_ERROR, at the
// top level and on one item per item the request named (a topic's
// partitions, a config resource, a group...), as Kafka answers a request
// whose handling threw. An all-zero answer would read as success (an
// EndTxn, InitProducerId or Heartbeat), and an empty list of items leaves
// a producer's batches unanswered until their delivery timeout. The broker
// goes on.
func errorResponse(r *Request, _ any) kmsg.Response {
	resp := r.Msg.ResponseKind()
	mirrorErrors(reflect.ValueOf(r.Msg).Elem(), reflect.ValueOf(resp).Elem(), 0)
	return resp
}

// errorMessageText is the ErrorMessage of errorResponse's items.
const errorMessageText = "the broker failed to serve this request; its log says why"

// mirrorErrors sets resp's error code (and message) fields and, for each
// list of structs in resp that answers a list in req (the same name, or
// one of itemLists), makes one element per request element: a struct's
// fields shared by name and type are copied (topic and partition names,
// ids, indexes), a scalar (a group id, a partition index) goes in the
// element's first field of its type, and the element's errors are set the
// same way.
func mirrorErrors(req, resp reflect.Value, depth int) {
	if depth > 4 {
		return
	}
	for i := range resp.NumField() {
		f := resp.Field(i)
		sf := resp.Type().Field(i)
		switch {
		case sf.Anonymous && f.Kind() == reflect.Struct:
			mirrorErrors(req, f, depth) // a wrapped kmsg type
		case sf.Name == "ErrorCode" && f.Kind() == reflect.Int16:
			f.SetInt(int64(kerr.UnknownServerError.Code))
		case sf.Name == "ErrorMessage" && f.Type() == reflect.TypeFor[*string]():
			msg := errorMessageText
			f.Set(reflect.ValueOf(&msg))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct && req.IsValid():
			rf := req.FieldByName(sf.Name)
			if alt, ok := itemLists[resp.Type().Name()+"."+sf.Name]; ok && req.FieldByName(alt).IsValid() {
				rf = req.FieldByName(alt)
			}
			if !rf.IsValid() || rf.Kind() != reflect.Slice {
				continue
			}
			out := reflect.MakeSlice(f.Type(), rf.Len(), rf.Len())
			for j := range rf.Len() {
				el, src := out.Index(j), rf.Index(j)
				if d, ok := el.Addr().Interface().(interface{ Default() }); ok {
					d.Default()
				}
				if src.Kind() == reflect.Struct {
					copyShared(src, el)
					mirrorErrors(src, el, depth+1)
				} else {
					setFirstOfType(el, src)
					mirrorErrors(reflect.Value{}, el, depth+1)
				}
				unknownOffsets(el)
			}
			f.Set(out)
		}
	}
}

// itemLists names the request list a response list answers where their
// names differ, by response type and field. (AlterReplicaLogDirs and
// AlterUserScramCredentials regroup their items: their error answers
// carry none.)
var itemLists = map[string]string{
	"CreateACLsResponse.Results":                     "Creations",
	"DeleteACLsResponse.Results":                     "Filters",
	"DescribeTransactionsResponse.TransactionStates": "TransactionalIDs",
	"ConsumerGroupDescribeResponse.Groups":           "GroupIDs",
	"ShareGroupDescribeResponse.Groups":              "GroupIDs",
	"StreamsGroupDescribeResponse.Groups":            "GroupIDs",
}

// copyShared copies the scalar fields (strings, numbers, ids, nullable
// strings) that from and to have under the same name and type.
func copyShared(from, to reflect.Value) {
	for i := range to.NumField() {
		f := to.Field(i)
		name := to.Type().Field(i).Name
		src := from.FieldByName(name)
		if !src.IsValid() || src.Type() != f.Type() || name == "ErrorCode" {
			continue
		}
		switch f.Kind() {
		case reflect.String, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Bool, reflect.Array:
			f.Set(src)
		case reflect.Pointer:
			if f.Type().Elem().Kind() == reflect.String {
				f.Set(src)
			}
		}
	}
}

// setFirstOfType puts scalar v in the first field of el of v's type
// (pointer-to-string fields take a string).
func setFirstOfType(el, v reflect.Value) {
	for i := range el.NumField() {
		f := el.Field(i)
		switch {
		case el.Type().Field(i).Name == "ErrorCode":
		case f.Type() == v.Type():
			f.Set(v)
			return
		case v.Kind() == reflect.String && f.Type() == reflect.TypeFor[*string]():
			s := v.String()
			f.Set(reflect.ValueOf(&s))
			return
		}
	}
}

// unknownOffsets sets an item's offset fields still 0 to -1, Kafka's
// "none" in an error answer (a produced batch's BaseOffset, a partition's
// HighWatermark).
func unknownOffsets(el reflect.Value) {
	for i := range el.NumField() {
		f := el.Field(i)
		name := el.Type().Field(i).Name
		if f.Kind() == reflect.Int64 && f.Int() == 0 && (name == "HighWatermark" || name == "Offset" || len(name) > 6 && name[len(name)-6:] == "Offset") {
			f.SetInt(-1)
		}
	}
}
