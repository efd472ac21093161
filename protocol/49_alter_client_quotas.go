package protocol

// AlterClientQuotas: versions 0-1 (v1 flexible). Each entry names an
// entity (user and/or client-id, a null name for the default) and sets
// keys or removes them (remove: true); the valid entries are one
// replicated command (actors/quotas), so every node enforces the same
// quotas, and a cluster follower forwards the request to the leader
// (forward.go). Validation as Kafka's controller: an empty or repeated
// entity type, an unknown key, a value not above 0, a fractional byte
// rate are INVALID_REQUEST with Kafka's message, an unknown entity type
// UNSUPPORTED_VERSION; such an entry fails alone. validate_only checks
// and changes nothing. An ip entity (alone, its only key
// connection_creation_rate) must name an address: Regent refuses host
// names, which Kafka resolves. ACLs: ALTER_CONFIGS on the cluster, else
// every entry gets CLUSTER_AUTHORIZATION_FAILED, as Kafka.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/quotas"
)

func init() { register(49, 0, 1, (*Server).alterClientQuotas) }

func (s *Server) alterClientQuotas(r *Request) {
	if s.forwardToLeader(r) {
		return
	}
	req := r.Msg.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	resp.Entries = make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	for i, e := range req.Entries {
		out := &resp.Entries[i]
		*out = kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = p.Type, p.Name
			out.Entity = append(out.Entity, ee)
		}
	}
	if !s.authorizedCluster(r, acls.AlterConfigs) {
		for i := range resp.Entries {
			resp.Entries[i].ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		r.Respond(resp)
		return
	}
	var (
		alts []quotas.Alteration
		at   []int // the response entry of each alteration
	)
	for i, e := range req.Entries {
		alt, err := alterationOf(e)
		if err != nil {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = quotaError(err)
			continue
		}
		alts, at = append(alts, alt), append(at, i)
	}
	if len(alts) == 0 || req.ValidateOnly {
		r.Respond(resp)
		return
	}
	if s.quotas == nil {
		for _, i := range at {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = quotaError(kafkaErr(kerr.UnknownServerError, "client quotas are not served by this broker"))
		}
		r.Respond(resp)
		return
	}
	s.async(r, func() kmsg.Response {
		errs, err := s.quotas.store.Alter(alts)
		switch {
		case errors.Is(err, quotas.ErrNotLeader):
			err = kafkaErr(kerr.NotController, err.Error())
		case errors.Is(err, quotas.ErrOutcomeUnknown):
			err = kafkaErr(kerr.RequestTimedOut, err.Error())
		case err != nil:
			err = kafkaErr(kerr.KafkaStorageError, err.Error())
		}
		for j, i := range at {
			e := err
			if e == nil && j < len(errs) {
				e = errs[j]
			}
			if e != nil {
				resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = quotaError(e)
			}
		}
		return resp
	})
}

// alterationOf checks one request entry and makes it an alteration.
func alterationOf(e kmsg.AlterClientQuotasRequestEntry) (quotas.Alteration, error) {
	parts := make([]quotas.Part, len(e.Entity))
	for i, p := range e.Entity {
		parts[i] = quotas.Part{Type: p.Type, Name: p.Name}
	}
	ent, err := quotas.EntityFromParts(parts)
	if err != nil {
		return quotas.Alteration{}, err
	}
	ops := make([]quotas.Op, len(e.Ops))
	for i, op := range e.Ops {
		ops[i] = quotas.Op{Key: op.Key, Value: op.Value, Remove: op.Remove}
	}
	if err := quotas.ValidateOps(ent, ops); err != nil {
		return quotas.Alteration{}, err
	}
	return quotas.Alteration{Entity: ent, Ops: ops}, nil
}

// kafkaErr is a quota error with Kafka's code and msg as its message.
func kafkaErr(code *kerr.Error, msg string) error {
	return &quotas.Error{Code: code.Code, Msg: msg}
}
