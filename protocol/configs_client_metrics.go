package protocol

// CLIENT_METRICS config resources (KIP-714): DescribeConfigs,
// IncrementalAlterConfigs and ListConfigResources serve them from the
// replicated clientmetrics store, as kafka-client-metrics.sh uses them.
// Keys: metrics, interval.ms, match, checked as Kafka checks them. As
// Kafka, a described resource lists only the keys set on it (source
// CLIENT_METRICS_CONFIG); a resource with no keys left is deleted.
// The legacy AlterConfigs (33) refuses this type (INVALID_REQUEST, saying
// so); kafka-client-metrics and kafka-configs use IncrementalAlterConfigs.

import (
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/actors/clientmetrics"
)

// ClientTelemetrySink takes pushed client metrics (telemetry/ implements
// it with an OTLP forwarder).
type ClientTelemetrySink interface {
	// ExportClientMetrics decodes metricsData (an OTLP MetricsData,
	// uncompressed) and queues it for export with meta's labels. It must
	// not block; an error means the payload did not decode.
	ExportClientMetrics(meta ClientTelemetryMeta, metricsData []byte) error
}

// ClientTelemetryMeta is what the broker adds to a client's metrics.
type ClientTelemetryMeta struct {
	ClientID, ClientInstanceID, Principal string
	SourceAddress, SourcePort             string
	SoftwareName, SoftwareVersion         string
}

// clientMetrics is the server's client-metrics state.
type clientMetrics struct {
	store *clientmetrics.Store
	// mgr and sink are nil when client telemetry is not exported.
	mgr  *clientmetrics.Manager
	sink ClientTelemetrySink
	now  func() time.Time
}

// SetClientMetrics installs the CLIENT_METRICS store and, with a sink, the
// client instance manager that serves GetTelemetrySubscriptions and
// PushTelemetry (without one those are not advertised, as Kafka without a
// telemetry exporter). Call before serving.
func (s *Server) SetClientMetrics(store *clientmetrics.Store, mgr *clientmetrics.Manager, sink ClientTelemetrySink) {
	cm := &clientMetrics{store: store, now: time.Now}
	if sink != nil && mgr != nil {
		cm.mgr, cm.sink = mgr, sink
	}
	s.clientMetrics = cm
}

func (s *Server) clientTelemetryOn() bool {
	return s.clientMetrics != nil && s.clientMetrics.sink != nil
}

// describeClientMetrics answers DescribeConfigs for one CLIENT_METRICS
// resource.
func (s *Server) describeClientMetrics(r *Request, req *kmsg.DescribeConfigsRequest, rr kmsg.DescribeConfigsRequestResource, or *kmsg.DescribeConfigsResponseResource) {
	if s.authz != nil && !s.authorizedCluster(r, acls.DescribeConfigs) {
		or.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		msg := "not authorized to DESCRIBE_CONFIGS client metrics subscriptions"
		or.ErrorMessage = &msg
		return
	}
	if rr.ResourceName == "" {
		or.ErrorCode = kerr.InvalidRequest.Code
		msg := "client metrics subscription name must not be empty"
		or.ErrorMessage = &msg
		return
	}
	if s.clientMetrics == nil {
		return
	}
	sub, ok := s.clientMetrics.store.Current().Get(rr.ResourceName)
	if !ok {
		return // as Kafka: an unknown subscription has no configs
	}
	want := map[string]bool{}
	for _, n := range rr.ConfigNames {
		want[n] = true
	}
	names := make([]string, 0, len(sub.Configs))
	for k := range sub.Configs {
		if len(want) == 0 || want[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = k
		v := sub.Configs[k]
		c.Value = &v
		c.Source = kmsg.ConfigSourceClientMetricsConfig
		c.ConfigType = kmsg.ConfigTypeList
		if k == clientmetrics.KeyInterval {
			c.ConfigType = kmsg.ConfigTypeInt
		}
		if req.IncludeSynonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = k, &v, c.Source
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
		or.Configs = append(or.Configs, c)
	}
}

// alterClientMetrics applies one resource's IncrementalAlterConfigs ops.
// It blocks until the change is applied: off the event loop only.
func (s *Server) alterClientMetrics(r *Request, name string, cfgs []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if s.authz != nil && !s.authorizedCluster(r, acls.AlterConfigs) {
		return &kerrMsg{kerr.ClusterAuthorizationFailed, "not authorized to ALTER_CONFIGS client metrics subscriptions"}
	}
	if s.clientMetrics == nil {
		return &kerrMsg{kerr.InvalidRequest, "client metrics subscriptions are not served by this broker"}
	}
	ops := make([]clientmetrics.Op, 0, len(cfgs))
	for _, c := range cfgs {
		ops = append(ops, clientmetrics.Op{Key: c.Name, Value: c.Value, Op: int8(c.Op)})
	}
	cur, _ := s.clientMetrics.store.Current().Get(name)
	next, err := clientmetrics.Incremental(name, cur.Configs, ops)
	if err != nil || validateOnly {
		return err
	}
	if err := s.clientMetrics.store.Set(name, next); err != nil {
		return err
	}
	s.log.Info("client metrics subscription altered", slog.String("name", name), slog.Any("configs", next))
	return nil
}

// clientMetricsNames lists the CLIENT_METRICS resources, sorted.
func (s *Server) clientMetricsNames() []string {
	if s.clientMetrics == nil {
		return nil
	}
	subs := s.clientMetrics.store.Current().Subs
	names := make([]string, 0, len(subs))
	for _, sub := range subs {
		names = append(names, sub.Name)
	}
	return names
}

// telemetryClient is what a telemetry request tells of its client.
func telemetryClient(r *Request) (clientmetrics.Client, ClientTelemetryMeta) {
	c := clientmetrics.Client{ClientID: r.ClientID}
	meta := ClientTelemetryMeta{ClientID: r.ClientID, Principal: AnonymousPrincipal}
	if r.Conn != nil {
		host, port := splitHostPort(r.Conn.RemoteAddr)
		c.SourceAddress, c.SourcePort = host, port
		c.SoftwareName, c.SoftwareVersion = connSoftware(r.Conn)
		meta.Principal = r.Conn.PrincipalName()
	}
	meta.SourceAddress, meta.SourcePort = c.SourceAddress, c.SourcePort
	meta.SoftwareName, meta.SoftwareVersion = c.SoftwareName, c.SoftwareVersion
	return c, meta
}

func splitHostPort(addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			host := addr[:i]
			if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
				host = host[1 : len(host)-1]
			}
			if _, err := strconv.Atoi(addr[i+1:]); err == nil {
				return host, addr[i+1:]
			}
			break
		}
	}
	return addr, ""
}

// connSoftware is the client software a connection named in ApiVersions.
func connSoftware(c *ConnInfo) (name, version string) {
	return c.SoftwareName, c.SoftwareVersion
}
