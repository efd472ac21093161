package protocol

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failedResponse answers every item of req with code and msg (a forward
// that failed, a handler that failed): each resource the request names
// gets the error, as Kafka's brokers answer a request their controller
// never served (itemErrors; TestFailedResponseCoversForwardedKeys and
// TestErrorResponseIsAnError check every key). Three keys' answers group
// their items otherwise than their requests: they are built here.
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
	case *kmsg.AlterReplicaLogDirsRequest:
		// The request lists partitions by target dir, the answer by topic.
		resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
		at := map[string]int{}
		for _, d := range req.Dirs {
			for _, rt := range d.Topics {
				for _, p := range rt.Partitions {
					addLogDirPartition(resp, at, rt.Topic, p, code)
				}
			}
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
