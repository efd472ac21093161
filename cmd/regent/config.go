package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/regent-broker/regent/actors/acls"
	"github.com/regent-broker/regent/cluster"
	"github.com/regent-broker/regent/netio"
	"github.com/regent-broker/regent/storage"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/telemetry"
)

// Config is the node's configuration. DefaultConfig gives the zero-config
// defaults: 127.0.0.1:9092, data under ./data.
type Config struct {
	Listen    string
	Advertise string
	// Listeners, when set, replaces Listen: NAME://host:port entries
	// (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL);
	// AdvertisedListeners gives each name the address clients are told.
	Listeners           string
	AdvertisedListeners string
	// SASL on SASL_* listeners: the enabled mechanisms, OAUTHBEARER's
	// JWKS file (or the unsecured mode, which excludes it) and its issuer,
	// audience, principal claim and scope checks, and
	// connections.max.reauth.ms (0: sessions do not expire).
	SASLMechanisms         string
	SASLOAuthJWKS          string
	SASLOAuthUnsecured     bool
	SASLOAuthIssuer        string
	SASLOAuthAudience      string
	SASLOAuthSubClaim      string // "": sub
	SASLOAuthScopeClaim    string // "": scope
	SASLOAuthRequiredScope string // comma-separated; "": none
	ReauthAfter            time.Duration
	DataDir                string
	Fsync                  string
	FlushInterval          time.Duration
	RetentionCheck         time.Duration
	CompactionCheck        time.Duration // as Kafka's log.cleaner.backoff.ms
	LogLevel               string
	LogFormat              string
	BrokerConfigs          string
	MaxConnections         int
	// MaxConnectionsPerIP and MaxConnectionsPerIPOverrides are Kafka's
	// max.connections.per.ip (0: unbounded) and its overrides
	// ("ADDR:N,..."; N may be 0).
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides string
	IdleTimeout                  time.Duration
	// EventLoops is each plaintext listener's event loop count (0: the
	// node's default, netio.DefaultEventLoops, split among them).
	EventLoops int
	// MaxMemory is what the network edge and fetches may hold, split into
	// the request, response and fetch budgets (netio.NewBudgets); the Go
	// runtime's soft memory limit is set from it too.
	MaxMemory int64
	// MaxProducerStates bounds the producers all partitions keep
	// idempotence state for together (partition.ProducerBudget).
	MaxProducerStates int64
	// MaxTransactionalIDs bounds the transactional ids the transaction
	// coordinator holds (txn.Options.MaxIDs).
	MaxTransactionalIDs int
	// MaxGroups bounds the groups the group coordinator holds
	// (group.Options.MaxGroups).
	MaxGroups int
	// MaxPartitions bounds the partitions of all topics together
	// (topics.Options.MaxPartitions).
	MaxPartitions int
	// MaxOpenFiles bounds the segment file descriptors open at once across
	// all partitions (storage.FileCache); 0: derived from RLIMIT_NOFILE.
	MaxOpenFiles int
	// DiskReserve is the space held back in DATA/meta/disk-reserve for
	// the writes that free space on a full disk (storage.Reserve); 0: none.
	DiskReserve int64
	Pprof       string
	// TxnMaxTimeout caps transaction.timeout.ms (Kafka's
	// transaction.max.timeout.ms); above it INVALID_TRANSACTION_TIMEOUT.
	TxnMaxTimeout time.Duration
	// Authorizer is "none" (every request allowed; "" too) or "acl"
	// (Kafka's ACLs, managed with CreateAcls and DeleteAcls, with the
	// broker config allow.everyone.if.no.acl.found); SuperUsers
	// ("User:a;User:b") are allowed everything.
	Authorizer string
	SuperUsers string

	// TLS on SSL and SASL_SSL listeners (PEM files; see tls.go), and on
	// cluster links when the ClusterTLS files are given.
	TLSCert, TLSKey, TLSClientCA                string
	TLSClientAuth                               string // none, requested, required
	ClusterTLSCert, ClusterTLSKey, ClusterTLSCA string
	// ClusterSecretFile holds the secret every node signs its admin
	// requests with (admin_auth.go); a cluster node with an admin
	// endpoint needs it or the ClusterTLS files.
	ClusterSecretFile string
	// ClusterSecretAcceptFile holds another secret accepted from peers
	// (never signed with), for rotating the cluster secret one node at a
	// time.
	ClusterSecretAcceptFile string

	// Telemetry, all off by default.
	OtelExporter    string  // none, otlp-grpc, otlp-http, stdout
	OtelEndpoint    string  // collector host:port or URL
	OtelSampleRatio float64 // 0..1, parent-based
	MetricsListen   string  // host:port serving Prometheus /metrics; empty: off
	// Client telemetry (KIP-714): where clients' pushed metrics go.
	ClientTelemetryExporter string // "" (--otel-exporter's when OTLP), none, otlp-grpc, otlp-http
	ClientTelemetryEndpoint string // "" : --otel-endpoint
	TelemetryMaxBytes       int32  // Kafka's telemetry.max.bytes

	// Cluster mode (raft), on when RaftListen is set.
	NodeID      int32
	RaftListen  string // raft transport host:port
	Peers       string // initial voters: "1=KAFKA/RAFT/ADMIN,2=..."
	Join        bool   // wait to be added instead of bootstrapping
	AdminListen string // HTTP admin host:port (cluster status, voters)
	// Rack is Kafka's broker.rack ("" none); in a cluster it turns on
	// reads from followers (protocol.Config.Rack).
	Rack string
	// Raft snapshot tuning (0: the defaults).
	RaftSnapshotThreshold uint64
	RaftSnapshotInterval  time.Duration
	RaftTrailingLogs      uint64
	RaftSnapshotBytes     int64
	// RaftGroups is the number of partition raft groups beside the
	// metadata group (0: the metadata group orders every partition). The
	// same on every node, fixed for the cluster's life.
	RaftGroups int
}

// Clustered reports whether the node runs in cluster mode.
func (c Config) Clustered() bool { return c.RaftListen != "" }

// parsePeers reads --peers: comma-separated id=kafka/raft/admin entries
// (admin may be left out).
func parsePeers(s string) ([]cluster.Peer, error) {
	var out []cluster.Peer
	seen := map[int32]bool{}
	for _, ent := range strings.Split(s, ",") {
		ent = strings.TrimSpace(ent)
		if ent == "" {
			continue
		}
		idStr, addrs, ok := strings.Cut(ent, "=")
		id, err := strconv.ParseInt(idStr, 10, 32)
		if !ok || err != nil || id <= 0 {
			return nil, fmt.Errorf("--peers entry %q: want id=kafka-host:port/raft-host:port[/admin-host:port] with a positive id", ent)
		}
		parts := strings.Split(addrs, "/")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("--peers entry %q: want id=kafka-host:port/raft-host:port[/admin-host:port]", ent)
		}
		for _, a := range parts {
			if _, _, err := splitHostPort(a); err != nil {
				return nil, fmt.Errorf("--peers entry %q: address %q: %w", ent, a, err)
			}
		}
		p := cluster.Peer{ID: int32(id), Kafka: parts[0], Raft: parts[1]}
		if len(parts) == 3 {
			p.Admin = parts[2]
		}
		if seen[p.ID] {
			return nil, fmt.Errorf("--peers names node %d twice", p.ID)
		}
		seen[p.ID] = true
		out = append(out, p)
	}
	return out, nil
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Listen:              "127.0.0.1:9092",
		SASLMechanisms:      "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		TLSClientAuth:       "none",
		DataDir:             "./data",
		Fsync:               "interval",
		FlushInterval:       time.Second,
		RetentionCheck:      30 * time.Second,
		CompactionCheck:     15 * time.Second,
		LogLevel:            "info",
		LogFormat:           "text",
		MaxConnections:      logconfig.DefaultMaxConnections,
		TelemetryMaxBytes:   1 << 20,
		IdleTimeout:         10 * time.Minute,
		MaxMemory:           netio.DefaultMaxMemory,
		DiskReserve:         storage.DefaultReserveBytes,
		MaxProducerStates:   defaultMaxProducerStates,
		MaxTransactionalIDs: defaultMaxTransactionalIDs,
		MaxGroups:           defaultMaxGroups,
		MaxPartitions:       defaultMaxPartitions,
		TxnMaxTimeout:       defaultTxnMaxTimeout,
		Authorizer:          "none",
		OtelExporter:        "none",
		OtelSampleRatio:     1,
		NodeID:              1,
	}
}

// Validate checks the config.
func (c Config) Validate() error {
	if _, _, err := splitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
	}
	if c.Advertise != "" {
		if _, _, err := splitHostPort(c.Advertise); err != nil {
			return fmt.Errorf("--advertise %q: %w", c.Advertise, err)
		}
	}
	if c.DataDir == "" {
		return fmt.Errorf("--data must not be empty")
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.Fsync != "interval" && c.Fsync != "always" {
		return fmt.Errorf("--fsync %q: want interval or always", c.Fsync)
	}
	if c.RaftGroups > 0 && !c.Clustered() {
		return fmt.Errorf("--raft-groups %d: partition raft groups need cluster mode (--raft-listen)", c.RaftGroups)
	}
	if c.RaftGroups > 0 && c.AdminListen == "" {
		// Transaction markers for partitions other nodes lead go there.
		return fmt.Errorf("--raft-groups %d: partition raft groups need --admin-listen (nodes send each other transaction markers through it)", c.RaftGroups)
	}
	if _, _, err := c.leaderRebalance(); err != nil {
		return err
	}
	if c.FlushInterval <= 0 || c.RetentionCheck <= 0 || c.CompactionCheck <= 0 {
		return fmt.Errorf("intervals must be positive")
	}
	if c.MaxMemory < minMaxMemory {
		return fmt.Errorf("--max-memory %d: want at least %s", c.MaxMemory, formatBytes(minMaxMemory))
	}
	if _, err := c.brokerOverrides(); err != nil {
		return err
	}
	if _, err := c.txnIDExpiration(); err != nil {
		return err
	}
	if _, err := c.replicaLagMax(); err != nil {
		return err
	}
	if c.Authorizer != "" && c.Authorizer != "none" && c.Authorizer != "acl" {
		return fmt.Errorf("--authorizer %q: want none or acl", c.Authorizer)
	}
	if err := checkSuperUsers(c.SuperUsers); err != nil {
		return fmt.Errorf("--super-users: %w", err)
	}
	if c.OtelSampleRatio < 0 || c.OtelSampleRatio > 1 {
		return fmt.Errorf("--otel-sample-ratio %v: want 0..1", c.OtelSampleRatio)
	}
	if err := c.telemetry().Validate(); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	if c.MetricsListen != "" {
		if _, _, err := splitHostPort(c.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen %q: %w", c.MetricsListen, err)
		}
	}
	if c.NodeID <= 0 {
		return fmt.Errorf("--node-id %d: want a positive id", c.NodeID)
	}
	if c.Clustered() {
		if _, _, err := splitHostPort(c.RaftListen); err != nil {
			return fmt.Errorf("--raft-listen %q: %w", c.RaftListen, err)
		}
		peers, err := parsePeers(c.Peers)
		if err != nil {
			return err
		}
		if !c.Join {
			found := false
			for _, p := range peers {
				found = found || p.ID == c.NodeID
			}
			if len(peers) > 0 && !found {
				return fmt.Errorf("--peers does not name this node (--node-id %d); a new node joins with --join", c.NodeID)
			}
		}
	} else if c.Peers != "" || c.Join {
		return fmt.Errorf("--peers and --join need --raft-listen (cluster mode)")
	}
	if c.AdminListen != "" {
		if _, _, err := splitHostPort(c.AdminListen); err != nil {
			return fmt.Errorf("--admin-listen %q: %w", c.AdminListen, err)
		}
	}
	if c.ClusterSecretFile != "" && !c.Clustered() {
		return errors.New("--cluster-secret-file is for cluster links: set --raft-listen too")
	}
	if c.ClusterSecretAcceptFile != "" && c.ClusterSecretFile == "" {
		return errors.New("--cluster-secret-accept-file is a second secret accepted beside --cluster-secret-file: set that too")
	}
	if c.Clustered() && c.AdminListen != "" && c.ClusterTLSCert == "" && c.ClusterSecretFile == "" {
		// Plaintext and unauthenticated, the endpoint would let anyone
		// who reaches it change the membership or act as any principal.
		return errors.New("--admin-listen over plaintext cluster links needs --cluster-secret-file (make one with 'regent cluster secret'; the same file on every node) or --cluster-tls-cert/-key/-ca")
	}
	return nil
}

// telemetry maps the flags onto the telemetry config.
func (c Config) telemetry() telemetry.Config {
	ratio := c.OtelSampleRatio
	if ratio == 0 {
		ratio = -1 // telemetry's zero means "the default", all
	}
	return telemetry.Config{
		Exporter:      c.OtelExporter,
		Endpoint:      c.OtelEndpoint,
		SampleRatio:   ratio,
		MetricsListen: c.MetricsListen,
		ServiceName:   "regent",
	}
}

func splitHostPort(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, fmt.Errorf("port %q: want 1-65535", port)
	}
	return host, int32(p), nil
}

func (c Config) brokerOverrides() (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(c.BrokerConfigs) != "" {
		for _, kv := range strings.Split(c.BrokerConfigs, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--broker-config entry %q: want key=value", kv)
			}
			out[k] = v
		}
	}
	// transaction.max.timeout.ms and --txn-max-timeout-ms are one value:
	// the one the transaction coordinator enforces is the one
	// DescribeConfigs reports (settleTxnMaxTimeout takes the key's value
	// when only the key is given).
	// A zero TxnMaxTimeout (a Config holding only BrokerConfigs, as the
	// flag's own check makes) counts as the default.
	txnSet := c.TxnMaxTimeout != 0 && c.TxnMaxTimeout != defaultTxnMaxTimeout
	txnMs := strconv.FormatInt(c.TxnMaxTimeout.Milliseconds(), 10)
	if v, ok := out[txnMaxTimeoutKey]; ok {
		if txnSet && strings.TrimSpace(v) != txnMs {
			return nil, fmt.Errorf("--broker-config %s=%s and --txn-max-timeout-ms %s disagree: set one", txnMaxTimeoutKey, v, txnMs)
		}
	} else if txnSet {
		out[txnMaxTimeoutKey] = txnMs
	}
	// The connection flags are the connection keys' values given at
	// start: DescribeConfigs reports them, and kafka-configs changes them.
	for _, m := range []struct {
		key, flag, val string
		set            bool
	}{
		{logconfig.MaxConnectionsKey, "--max-connections", strconv.Itoa(c.MaxConnections), c.MaxConnections != 0 && c.MaxConnections != logconfig.DefaultMaxConnections},
		{logconfig.MaxConnectionsPerIPKey, "--max-connections-per-ip", strconv.Itoa(c.MaxConnectionsPerIP), c.MaxConnectionsPerIP > 0},
		{logconfig.MaxConnectionsPerIPOverKey, "--max-connections-per-ip-overrides", c.MaxConnectionsPerIPOverrides, strings.TrimSpace(c.MaxConnectionsPerIPOverrides) != ""},
	} {
		if v, ok := out[m.key]; ok {
			if m.set && strings.TrimSpace(v) != m.val {
				return nil, fmt.Errorf("--broker-config %s=%s and %s %s disagree: set one", m.key, v, m.flag, m.val)
			}
		} else if m.set {
			out[m.key] = m.val
		}
	}
	if err := logconfig.CheckConnectionLimits(out); err != nil {
		return nil, fmt.Errorf("--broker-config: %w", err)
	}
	return out, nil
}

const txnMaxTimeoutKey = "transaction.max.timeout.ms"

// defaultTxnMaxTimeout is --txn-max-timeout-ms's default, the broker
// config's default (one constant, logconfig's).
const defaultTxnMaxTimeout = logconfig.TransactionMaxTimeoutMsDefault * time.Millisecond

// settleTxnMaxTimeout takes --broker-config's transaction.max.timeout.ms
// as the transaction timeout bound when --txn-max-timeout-ms is left at
// its default. A malformed --broker-config is left for Validate to report.
func (c *Config) settleTxnMaxTimeout() error {
	o, err := c.brokerOverrides()
	if err != nil {
		return nil
	}
	v, ok := o[txnMaxTimeoutKey]
	if !ok {
		return nil
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || ms < 1 {
		return fmt.Errorf("--broker-config %s=%q: want a positive number of milliseconds below 2^31", txnMaxTimeoutKey, v)
	}
	c.TxnMaxTimeout = time.Duration(ms) * time.Millisecond
	return nil
}

// txnIDExpiration is --broker-config's transactional.id.expiration.ms
// (Kafka's default, seven days, when absent): how long the transaction
// coordinator keeps an idle transactional id.
func (c Config) txnIDExpiration() (time.Duration, error) {
	const key = "transactional.id.expiration.ms"
	o, err := c.brokerOverrides()
	if err != nil {
		return 0, err
	}
	v, ok := o[key]
	if !ok {
		return logconfig.DefaultTransactionalIDExpirationMs * time.Millisecond, nil
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || ms < 1 {
		return 0, fmt.Errorf("--broker-config %s=%q: want a positive number of milliseconds below 2^31", key, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// replicaLagMax is --broker-config's replica.lag.time.max.ms (Kafka's
// default, 30 s, when absent): how long the raft leader keeps a voter it
// has not seen caught up in the ISR.
func (c Config) replicaLagMax() (time.Duration, error) {
	const key = logconfig.ReplicaLagTimeMaxMsKey
	o, err := c.brokerOverrides()
	if err != nil {
		return 0, err
	}
	v, ok := o[key]
	if !ok {
		return logconfig.DefaultReplicaLagTimeMaxMs * time.Millisecond, nil
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms < 1 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, fmt.Errorf("--broker-config %s=%q: want a positive number of milliseconds", key, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// leaderRebalance is --broker-config's auto.leader.rebalance.enable and
// leader.imbalance.check.interval.seconds (Kafka's defaults: on, 300 s):
// whether and how often partition raft groups move their leadership to
// their preferred node.
func (c Config) leaderRebalance() (bool, time.Duration, error) {
	o, err := c.brokerOverrides()
	if err != nil {
		return false, 0, err
	}
	enabled, every := true, 300*time.Second
	if v, ok := o[logconfig.AutoLeaderRebalanceEnableKey]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return false, 0, fmt.Errorf("--broker-config %s=%q: want true or false", logconfig.AutoLeaderRebalanceEnableKey, v)
		}
		enabled = b
	}
	if v, ok := o[logconfig.LeaderImbalanceCheckIntervalSecondsKey]; ok {
		s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || s < 1 || s > math.MaxInt64/int64(time.Second) {
			return false, 0, fmt.Errorf("--broker-config %s=%q: want a positive number of seconds", logconfig.LeaderImbalanceCheckIntervalSecondsKey, v)
		}
		every = time.Duration(s) * time.Second
	}
	return enabled, every, nil
}

// defaultMaxProducerStates is --max-producer-states's default. Producers
// whose ids InitProducerId handed out (consecutive) cost ~200 bytes of
// heap each; ids made up at random ~1 KiB of RSS each (a page of the
// producer table each, and the collector's headroom at GOGC=200): 400,000
// took a broker from 26 to 412 MiB. A quarter million is then ~250 MiB at
// worst, under the Go memory limit the default --max-memory sets (768
// MiB).
const defaultMaxProducerStates = 250_000

// defaultMaxTransactionalIDs is --max-transactional-ids's default. A
// transactional id costs the coordinator about 1 KiB of live heap (its
// actor, timer and state) and ~3.7 KiB of RSS at GOGC=200: 100,000 ids
// made up at random took a broker from 26 to 371 MiB. A hundred thousand
// is then at most ~100 MiB live, under the Go memory limit the default
// --max-memory sets.
const defaultMaxTransactionalIDs = 100_000

// defaultMaxGroups is --max-groups's default. A group that holds one
// offset costs ~1.1 KiB of heap resting (without an actor): 100,000 made
// by OffsetCommit held 114 MB after a collection, a peak RSS of 268 MB.
const defaultMaxGroups = 100_000

// defaultMaxPartitions is --max-partitions's default. 100,000 partitions
// created by one CreateTopics took a broker to 840 MB RSS (~8 KiB each)
// and as many directories; half that is far more than one node serves
// well, and bounded.
const defaultMaxPartitions = 50_000

// minMaxMemory is the smallest --max-memory: below it the request budget
// (3/8) cannot hold a few ordinary produce requests at once.
const minMaxMemory = 64 << 20

// byteUnits are the suffixes parseBytes accepts, longest first.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// parseBytes reads a byte size: a whole number with an optional unit
// (512MiB, 1GiB, 1.5G is refused: whole numbers only; K, M, G and T are
// binary like KiB, MiB, GiB, TiB; KB, MB, GB, TB decimal).
func parseBytes(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || (mult > 1 && n > (1<<63-1)/mult) {
		return 0, errors.New("want a size such as 512MiB or 1GiB")
	}
	return n * mult, nil
}

// formatBytes prints n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// bytesValue is a flag holding a byte size (see parseBytes) of at least min.
type bytesValue struct {
	p   *int64
	min int64
}

func (v bytesValue) String() string {
	if v.p == nil {
		return ""
	}
	return formatBytes(*v.p)
}

func (v bytesValue) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	if n < v.min {
		return fmt.Errorf("want at least %s", formatBytes(v.min))
	}
	*v.p = n
	return nil
}

// checkSuperUsers checks Kafka's super.users form: principals "Type:Name"
// separated by ';' (empty: none).
func checkSuperUsers(s string) error {
	for _, u := range acls.ParseSuperUsers(s) {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("%q is not a principal of the form User:NAME", u)
		}
	}
	return nil
}
