package protocol

// DescribeClientQuotas: versions 0-1 (v1 flexible). Answers the entities
// whose quotas the filter matches, with their values, from this node's
// copy of the replicated store (actors/quotas): each component matches its
// entity part by name (MATCH_TYPE_EXACT), the default (MATCH_TYPE_DEFAULT)
// or any (MATCH_TYPE_SPECIFIED); strict also asks that the entity have no
// other part. A bad filter (a repeated or empty type, a match string where
// none belongs or none where one does, ip beside user or client-id) is
// INVALID_REQUEST with Kafka's reason, an unknown type or match type
// UNSUPPORTED_VERSION, as Kafka's. An ip filter's address matches the
// canonical form ip entities are stored in. ACLs: DESCRIBE_CONFIGS on the
// cluster, else CLUSTER_AUTHORIZATION_FAILED, as Kafka.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/quotas"
)

func init() { register(48, 0, 1, (*Server).describeClientQuotas) }

func (s *Server) describeClientQuotas(r *Request) {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.authorizedCluster(r, acls.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	comps := make([]quotas.Component, len(req.Components))
	for i, c := range req.Components {
		comps[i] = quotas.Component{Type: c.EntityType, Match: quotas.MatchType(c.MatchType), Name: c.Match}
	}
	snap := &quotas.Snapshot{}
	if s.quotas != nil {
		snap = s.quotas.store.Snapshot()
	}
	found, err := snap.Describe(comps, req.Strict)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = quotaError(err)
		r.Respond(resp)
		return
	}
	// Non-nil: the entries are nullable, and Kafka's client reads a null
	// as an error.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	ents := make([]quotas.Entity, 0, len(found))
	for e := range found {
		ents = append(ents, e)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].String() < ents[j].String() })
	for _, e := range ents {
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Parts() {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = p.Type, p.Name
			entry.Entity = append(entry.Entity, ee)
		}
		vals := found[e]
		for _, k := range vals.Keys() {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, vals[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	r.Respond(resp)
}

// quotaError is the code and message of a quota request's error.
func quotaError(err error) (int16, *string) {
	msg := err.Error()
	if qe, ok := err.(*quotas.Error); ok {
		return qe.Code, &msg
	}
	return errorCode(err), &msg
}
