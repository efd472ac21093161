package protocol

// GROUP config resources (KIP-848 group configs, Kafka 4.x):
// DescribeConfigs, IncrementalAlterConfigs and ListConfigResources serve
// them from the replicated groupconfig store, as kafka-configs
// --entity-type groups uses them. As Kafka: any group id may be described
// or altered whether or not the group exists; a description lists every
// group key, the group's overrides with source GROUP_CONFIG and the rest
// at the broker's value (STATIC_BROKER_CONFIG) or Kafka's default; an
// alteration is checked whole (names, types, bounds, the broker's
// group.*.min/max keys, session timeout above heartbeat interval) and
// refused with INVALID_CONFIG and Kafka's message. DESCRIBE_CONFIGS and
// ALTER_CONFIGS are checked on the GROUP resource. The KIP-848
// coordinator applies consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms per group, the KIP-1071 one
// streams.session.timeout.ms, streams.heartbeat.interval.ms and
// streams.num.standby.replicas; the share keys are stored and checked for
// the share coordinator. A group
// with no overrides left is deleted. AlterConfigs (33) replaces a group's
// whole set of overrides, as Kafka's controller does.

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/groupconfig"
)

// SetGroupConfigs installs the GROUP config store. Call before serving.
func (s *Server) SetGroupConfigs(store *groupconfig.Store) { s.groupConfigs = store }

// groupConfigAuthError checks op on the GROUP resource name.
func (s *Server) groupConfigAuthError(r *Request, name string, op kmsg.ACLOperation) error {
	if s.authz != nil && !s.authorized(r, op, acls.Group, name) {
		return &kerrMsg{kerr.GroupAuthorizationFailed, "not authorized to " + op.String() + " group '" + name + "'"}
	}
	return nil
}

// describeGroupConfigs fills or with the group's configs.
func (s *Server) describeGroupConfigs(r *Request, req *kmsg.DescribeConfigsRequest, rr kmsg.DescribeConfigsRequestResource, or *kmsg.DescribeConfigsResponseResource) {
	fail := func(err error) { or.ErrorCode, or.ErrorMessage = errorCode(err), errorMessage(err) }
	if err := s.groupConfigAuthError(r, rr.ResourceName, acls.DescribeConfigs); err != nil {
		fail(err)
		return
	}
	if s.groupConfigs == nil {
		fail(&kerrMsg{kerr.InvalidRequest, "group configs are not served by this broker"})
		return
	}
	if rr.ResourceName == "" {
		fail(&kerrMsg{kerr.InvalidRequest, "Group name must not be empty"})
		return
	}
	want := map[string]bool{}
	for _, n := range rr.ConfigNames {
		want[n] = true
	}
	for _, e := range s.groupConfigs.Describe(rr.ResourceName) {
		if len(want) > 0 && !want[e.Name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = e.Name
		v := e.Value
		c.Value = &v
		c.Source = kmsg.ConfigSource(e.Source)
		c.IsDefault = e.Source == groupconfig.SourceDefault
		c.ConfigType = kmsg.ConfigType(e.Type)
		if req.IncludeDocumentation && e.Doc != "" {
			doc := e.Doc
			c.Documentation = &doc
		}
		if req.IncludeSynonyms {
			for _, syn := range e.Synonyms {
				cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				sv := syn.Value
				cs.Name, cs.Value, cs.Source = syn.Name, &sv, kmsg.ConfigSource(syn.Source)
				c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
			}
		}
		or.Configs = append(or.Configs, c)
	}
}

// alterGroupConfigs applies one IncrementalAlterConfigs resource of type
// GROUP. Off the event loop: it waits for the change to be applied.
func (s *Server) alterGroupConfigs(r *Request, group string, cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if err := s.groupConfigAlterable(r, group); err != nil {
		return err
	}
	ops := make([]groupconfig.Op, 0, len(cfgs))
	for _, c := range cfgs {
		ops = append(ops, groupconfig.Op{Key: c.Name, Value: c.Value, Op: int8(c.Op)})
	}
	next, err := groupconfig.Incremental(s.groupConfigs.Overrides(group), ops)
	if err != nil {
		return err
	}
	return s.setGroupConfigs(group, next, validateOnly)
}

// replaceGroupConfigs applies one AlterConfigs (legacy) resource of type
// GROUP: configs replace the group's whole set of overrides, as Kafka's
// controller does. Off the event loop.
func (s *Server) replaceGroupConfigs(r *Request, group string, configs map[string]*string, validateOnly bool) error {
	if err := s.groupConfigAlterable(r, group); err != nil {
		return err
	}
	next := make(map[string]string, len(configs))
	for k, v := range configs {
		if v == nil {
			return &kerrMsg{kerr.InvalidRequest, "Null value not supported for : " + k}
		}
		next[k] = *v
	}
	return s.setGroupConfigs(group, next, validateOnly)
}

// groupConfigAlterable checks that the group's configs may be altered.
func (s *Server) groupConfigAlterable(r *Request, group string) error {
	if err := s.groupConfigAuthError(r, group, acls.AlterConfigs); err != nil {
		return err
	}
	if s.groupConfigs == nil {
		return &kerrMsg{kerr.InvalidRequest, "group configs are not served by this broker"}
	}
	if group == "" {
		return &kerrMsg{kerr.InvalidRequest, "Default group resources are not allowed."}
	}
	return nil
}

// setGroupConfigs checks next, the group's whole overrides, and stores it
// unless validateOnly.
func (s *Server) setGroupConfigs(group string, next map[string]string, validateOnly bool) error {
	if validateOnly {
		_, err := s.groupConfigs.Check(group, next)
		return err
	}
	if err := s.groupConfigs.Set(group, next); err != nil {
		return err
	}
	s.log.Info("group configs altered", slog.String("group", group), slog.Any("configs", next))
	return nil
}

// groupConfigNames lists the groups with config overrides, sorted.
func (s *Server) groupConfigNames() []string {
	if s.groupConfigs == nil {
		return nil
	}
	return s.groupConfigs.Groups()
}
