package protocol

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failedResponse answers every item of a forwarded request with code and
// msg (a forward that failed): each resource the request names gets the
// error, as Kafka's brokers answer a request their controller never served.
func failedResponse(req kmsg.Request, code int16, msg string) kmsg.Response {
	m := &msg
	switch req := req.(type) {
	case *kmsg.CreateTopicsRequest:
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range req.Topics {
			ot := kmsg.NewCreateTopicsResponseTopic()
			ot.Topic, ot.ErrorCode, ot.ErrorMessage = rt.Topic, code, m
			ot.NumPartitions, ot.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, n := range req.TopicNames {
			ot := kmsg.NewDeleteTopicsResponseTopic()
			ot.Topic, ot.ErrorCode, ot.ErrorMessage = &n, code, m
			resp.Topics = append(resp.Topics, ot)
		}
		for _, rt := range req.Topics {
			ot := kmsg.NewDeleteTopicsResponseTopic()
			ot.Topic, ot.TopicID, ot.ErrorCode, ot.ErrorMessage = rt.Topic, rt.TopicID, code, m
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	case *kmsg.DeleteRecordsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range req.Topics {
			ot := kmsg.NewDeleteRecordsResponseTopic()
			ot.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				op := kmsg.NewDeleteRecordsResponseTopicPartition()
				op.Partition, op.LowWatermark, op.ErrorCode = rp.Partition, -1, code
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
	case *kmsg.CreateACLsRequest:
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, m
			resp.Results = append(resp.Results, res)
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, m
			resp.Results = append(resp.Results, res)
		}
		return resp
	case *kmsg.AlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, rr := range req.Resources {
			or := kmsg.NewAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName, or.ErrorCode, or.ErrorMessage = rr.ResourceType, rr.ResourceName, code, m
			resp.Resources = append(resp.Resources, or)
		}
		return resp
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			or := kmsg.NewIncrementalAlterConfigsResponseResource()
			or.ResourceType, or.ResourceName, or.ErrorCode, or.ErrorMessage = rr.ResourceType, rr.ResourceName, code, m
			resp.Resources = append(resp.Resources, or)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, rt := range req.Topics {
			ot := kmsg.NewCreatePartitionsResponseTopic()
			ot.Topic, ot.ErrorCode, ot.ErrorMessage = rt.Topic, code, m
			resp.Topics = append(resp.Topics, ot)
		}
		return resp
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
	case *kmsg.CreateDelegationTokenRequest:
		resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.RenewDelegationTokenRequest:
		resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.ExpireDelegationTokenRequest:
		resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AlterClientQuotasRequest:
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			oe := kmsg.NewAlterClientQuotasResponseEntry()
			oe.ErrorCode, oe.ErrorMessage = code, m
			for _, ent := range e.Entity {
				oe.Entity = append(oe.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: ent.Type, Name: ent.Name})
			}
			resp.Entries = append(resp.Entries, oe)
		}
		return resp
	case *kmsg.AlterPartitionAssignmentsRequest:
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, m
		for _, rt := range req.Topics {
			ot := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			ot.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				op := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				op.Partition, op.ErrorCode, op.ErrorMessage = rp.Partition, code, m
				ot.Partitions = append(ot.Partitions, op)
			}
			resp.Topics = append(resp.Topics, ot)
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
	// Not a forwarded key (TestFailedResponseCoversForwardedKeys keeps
	// every forwarded key above): an empty answer.
	return req.ResponseKind()
}
