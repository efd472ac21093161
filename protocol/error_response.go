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
	return failedResponse(r.Msg, kerr.UnknownServerError.Code, errorMessageText)
}

// errorMessageText is the ErrorMessage of errorResponse's items.
const errorMessageText = "the broker failed to serve this request; its log says why"

// itemErrors is a response of req's kind in which every error code is
// code and every error message msg, at the top level and on one item per
// item req names (mirrorErrors).
func itemErrors(req kmsg.Request, code int16, msg string) kmsg.Response {
	resp := req.ResponseKind()
	mirrorErrors(reflect.ValueOf(req).Elem(), reflect.ValueOf(resp).Elem(), itemError{code, msg}, 0)
	return resp
}

// itemError is what mirrorErrors puts in each error field.
type itemError struct {
	code int16
	msg  string
}

// mirrorErrors sets resp's error code (and message) fields and, for each
// list of structs in resp that answers a list in req (the same name, or
// one of itemLists), makes one element per request element: a struct's
// fields shared by name and type are copied (topic and partition names,
// ids, indexes), a scalar (a group id, a partition index) goes in the
// element's first field of its type, and the element's errors are set the
// same way.
func mirrorErrors(req, resp reflect.Value, e itemError, depth int) {
	if depth > 4 {
		return
	}
	for i := range resp.NumField() {
		f := resp.Field(i)
		sf := resp.Type().Field(i)
		switch {
		case sf.Anonymous && f.Kind() == reflect.Struct:
			mirrorErrors(req, f, e, depth) // a wrapped kmsg type
		case sf.Name == "ErrorCode" && f.Kind() == reflect.Int16:
			f.SetInt(int64(e.code))
		case sf.Name == "ErrorMessage" && f.Type() == reflect.TypeFor[*string]():
			msg := e.msg
			f.Set(reflect.ValueOf(&msg))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct && req.IsValid():
			rf := requestItems(req, resp.Type().Name(), sf.Name)
			if !rf.IsValid() {
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
					mirrorErrors(src, el, e, depth+1)
				} else {
					setFirstOfType(el, src)
					mirrorErrors(reflect.Value{}, el, e, depth+1)
				}
				unknownOffsets(el)
			}
			f.Set(out)
		}
	}
}

// requestItems is the list of req that response list field of type
// respType answers: the request's list of the same name, or the one
// itemLists names, whichever has items (the same name when both or
// neither do); invalid when req has neither.
func requestItems(req reflect.Value, respType, field string) reflect.Value {
	var out reflect.Value
	for _, name := range []string{field, itemLists[respType+"."+field]} {
		if name == "" {
			continue
		}
		rf := req.FieldByName(name)
		if !rf.IsValid() || rf.Kind() != reflect.Slice {
			continue
		}
		if !out.IsValid() || out.Len() == 0 && rf.Len() > 0 {
			out = rf
		}
	}
	return out
}

// itemLists names the request list a response list answers where their
// names differ, by response type and field. (AlterReplicaLogDirs,
// AlterUserScramCredentials and UpdateFeatures regroup their items:
// failedResponse builds their answers.)
var itemLists = map[string]string{
	"DeleteTopicsResponse.Topics":                    "TopicNames", // up to v5
	"CreateACLsResponse.Results":                     "Creations",
	"DeleteACLsResponse.Results":                     "Filters",
	"DescribeTransactionsResponse.TransactionStates": "TransactionalIDs",
	"ConsumerGroupDescribeResponse.Groups":           "GroupIDs",
	"ShareGroupDescribeResponse.Groups":              "GroupIDs",
	"StreamsGroupDescribeResponse.Groups":            "GroupIDs",
}

// copyShared copies the scalar fields (strings, numbers, ids, nullable
// strings) that from and to have under the same name and type, except
// numbers to already holds (their schema defaults).
func copyShared(from, to reflect.Value) {
	for i := range to.NumField() {
		f := to.Field(i)
		name := to.Type().Field(i).Name
		src := from.FieldByName(name)
		if !src.IsValid() || src.Type() != f.Type() || name == "ErrorCode" {
			continue
		}
		switch f.Kind() {
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			// A field with a schema default (NumPartitions -1) keeps it:
			// the answer says "unknown", not what was asked for.
			if f.IsZero() {
				f.Set(src)
			}
		case reflect.String, reflect.Bool, reflect.Array:
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
// HighWatermark or LowWatermark).
func unknownOffsets(el reflect.Value) {
	for i := range el.NumField() {
		f := el.Field(i)
		name := el.Type().Field(i).Name
		if f.Kind() == reflect.Int64 && f.Int() == 0 && (name == "HighWatermark" || name == "LowWatermark" || name == "Offset" || len(name) > 6 && name[len(name)-6:] == "Offset") {
			f.SetInt(-1)
		}
	}
}
