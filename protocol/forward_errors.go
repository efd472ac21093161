package protocol

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failedResponse answers every item of a forwarded request with code and
// msg (a forward that failed): each resource the request names gets the
// error, as Kafka's brokers answer a request their controller never served
// (itemErrors; TestFailedResponseCoversForwardedKeys checks every forwarded
// key). Two keys' answers group their items otherwise than their requests:
// they are built here.
func failedResponse(req kmsg.Request, code int16, msg string) kmsg.Response {
	m := &msg
	switch req := req.(type) {
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = user, code, m
				resp.Results = append(resp.Results, res)
			}
		}
		for _, d := range req.Deletions {
			add(d.Name)
		}
		for _, u := range req.Upsertions {
			add(u.Name)
		}
		return resp
	case *kmsg.UpdateFeaturesRequest:
		resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
		resp.ErrorCode, resp.ErrorMessage = code, m
		if req.Version < 2 {
			for _, u := range req.FeatureUpdates {
				resp.Results = append(resp.Results, kmsg.UpdateFeaturesResponseResult{Feature: u.Feature, ErrorCode: code, ErrorMessage: m})
			}
		}
		return resp
	}
	return itemErrors(req, code, msg)
}
