// Command regent runs a Kafka-compatible broker.
//
//	regent --listen 127.0.0.1:9092 --data ./data
//
// Every flag has a REGENT_* environment twin (flag wins).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unicode"

	"github.com/regent-broker/regent/actors/topics"
	"github.com/regent-broker/regent/storage/logconfig"
	"github.com/regent-broker/regent/telemetry"
)

func main() {
	os.Exit(regent(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// regent runs the command line args and returns the exit status: 0 for
// success and for -h, 2 for a bad command line or environment.
func regent(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "cluster":
			return clusterCommand(args[1:], stdout, stderr)
		case "users":
			return usersCommand(args[1:], stdout, stderr)
		case "version", "--version", "-version":
			fmt.Fprintln(stdout, versionLine())
			return 0
		}
	}
	cfg, err := parseConfig(args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c := DefaultConfig()
		printUsage(stdout, newFlagSet(&c))
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "regent:", err)
		fmt.Fprintln(stderr, "(regent -h lists the commands and flags)")
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "regent:", err)
		return 2
	}
	logger := newLogger(cfg.LogLevel, cfg.LogFormat)
	slog.SetDefault(logger)
	tuneGC(os.Getenv, logger)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ver, rev, _ := versionInfo()
	logger.Info("starting regent", "version", ver, "commit", rev)
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("regent stopped with an error", "err", err)
		return 1
	}
	return 0
}

func newLogger(level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if format == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	// Logs made with a traced context carry trace_id and span_id.
	return slog.New(telemetry.LogHandler(h))
}

// usageError is a bad command line or environment (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// newFlagSet binds every flag to c (whose values are the defaults). Each
// flag's environment twin is derived from its name (envName); usage
// strings do not repeat it.
func newFlagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("regent", flag.ContinueOnError)
	// parseConfig's caller prints errors and usage; the flag package
	// would print them as well.
	fs.SetOutput(io.Discard)
	fs.Var(addrValue{p: &c.Listen}, "listen", "`host:port` to listen on")
	fs.Var(addrValue{p: &c.Advertise, optional: true}, "advertise", "`host:port` clients are told to connect to; default: the listen address")
	fs.Var(checkedString{p: &c.Listeners, check: func(s string) error {
		if s == "" {
			return nil
		}
		_, err := parseListeners(s)
		return err
	}}, "listeners", "listeners as Kafka names them, comma-separated NAME://host:port with NAME PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (e.g. PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094); replaces --listen")
	fs.Var(checkedString{p: &c.AdvertisedListeners, check: func(s string) error {
		if s == "" {
			return nil
		}
		_, err := parseListeners(s)
		return err
	}}, "advertised-listeners", "NAME://host:port per listener that clients of that listener are told to connect to; default: each listener's address")
	fs.Var(checkedString{p: &c.SASLMechanisms, check: checkMechanisms}, "sasl-mechanisms", "SASL mechanisms served on SASL_* listeners, comma-separated: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER")
	fs.StringVar(&c.SASLOAuthJWKS, "sasl-oauthbearer-jwks", c.SASLOAuthJWKS, "JSON Web Key Set `file` whose public keys sign OAUTHBEARER tokens")
	fs.StringVar(&c.SASLOAuthIssuer, "sasl-oauthbearer-issuer", c.SASLOAuthIssuer, "issuer (iss) OAUTHBEARER tokens must carry; empty: any")
	fs.StringVar(&c.SASLOAuthAudience, "sasl-oauthbearer-audience", c.SASLOAuthAudience, "audience (aud) OAUTHBEARER tokens must include; empty: any")
	fs.Var(boolValue{p: &c.SASLOAuthUnsecured}, "sasl-oauthbearer-unsecured", "accept unsecured OAUTHBEARER tokens (\"alg\":\"none\", not verified: any client can claim any principal) as Kafka's default validator does; for tests and development only; excludes --sasl-oauthbearer-jwks")
	fs.StringVar(&c.SASLOAuthSubClaim, "sasl-oauthbearer-sub-claim", c.SASLOAuthSubClaim, "claim of OAUTHBEARER tokens that names the principal (Kafka's sasl.oauthbearer.sub.claim.name); empty: sub")
	fs.StringVar(&c.SASLOAuthScopeClaim, "sasl-oauthbearer-scope-claim", c.SASLOAuthScopeClaim, "claim of OAUTHBEARER tokens holding their scopes (Kafka's sasl.oauthbearer.scope.claim.name); empty: scope")
	fs.StringVar(&c.SASLOAuthRequiredScope, "sasl-oauthbearer-required-scope", c.SASLOAuthRequiredScope, "scopes, comma-separated, every OAUTHBEARER token must carry; empty: none")
	fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM `file`: the certificate chain SSL and SASL_SSL listeners present (reloaded on SIGHUP)")
	fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM `file`: the private key of --tls-cert")
	fs.StringVar(&c.TLSClientCA, "tls-client-ca", c.TLSClientCA, "PEM `file`: CAs client certificates must chain to (for --tls-client-auth)")
	fs.Var(choiceValue{p: &c.TLSClientAuth, choices: []string{"none", "requested", "required"}}, "tls-client-auth", "Kafka's ssl.client.auth on TLS listeners: none, requested (verified if given) or required; a verified certificate's subject CN is the principal User:CN")
	fs.StringVar(&c.ClusterTLSCert, "cluster-tls-cert", c.ClusterTLSCert, "PEM `file`: this node's certificate for raft and the admin endpoint (mutual TLS; with --cluster-tls-key and --cluster-tls-ca)")
	fs.StringVar(&c.ClusterTLSKey, "cluster-tls-key", c.ClusterTLSKey, "PEM `file`: the private key of --cluster-tls-cert")
	fs.StringVar(&c.ClusterTLSCA, "cluster-tls-ca", c.ClusterTLSCA, "PEM `file`: CAs every node's (and admin client's) certificate must chain to")
	fs.StringVar(&c.ClusterSecretFile, "cluster-secret-file", c.ClusterSecretFile, "`file` holding the cluster secret, the same on every node (32+ bytes; 'regent cluster secret' makes one): admin requests between nodes that change something are signed with it, and without --cluster-tls-* raft-port connections are authenticated with it; needed for --admin-listen without --cluster-tls-*")
	fs.StringVar(&c.ClusterSecretAcceptFile, "cluster-secret-accept-file", c.ClusterSecretAcceptFile, "`file` holding another cluster secret this node accepts from peers but never signs or proves with: to rotate the secret without stopping the cluster (README, Cluster links)")
	fs.Var(reauthValue{p: &c.ReauthAfter}, "connections-max-reauth-ms", "Kafka's connections.max.reauth.ms: a SASL session lasts this long (or until its token expires), then the client must re-authenticate or is disconnected; 0: off")
	fs.Var(checkedString{p: &c.DataDir, check: func(s string) error {
		if s == "" {
			return errors.New("want a directory")
		}
		return nil
	}}, "data", "data `directory`")
	fs.Var(choiceValue{p: &c.Fsync, choices: []string{"interval", "always"}}, "fsync", "when to fsync: 'interval' (write before ack, fsync every --flush-interval) or 'always' (fsync before ack)")
	fs.Var(durationValue{p: &c.FlushInterval, min: time.Millisecond}, "flush-interval", "fsync interval for --fsync=interval")
	fs.Var(durationValue{p: &c.RetentionCheck, min: time.Millisecond}, "retention-check-interval", "how often retention and compaction run")
	fs.Var(durationValue{p: &c.CompactionCheck, min: time.Millisecond}, "compaction-check-interval", "how often compacted topics are also checked for a compaction pass (Kafka's log.cleaner.backoff.ms)")
	fs.Var(logLevelValue{p: &c.LogLevel}, "log-level", "debug, info, warn or error")
	fs.Var(choiceValue{p: &c.LogFormat, choices: []string{"text", "json"}}, "log-format", "text or json")
	fs.Var(checkedString{p: &c.BrokerConfigs, check: func(s string) error {
		_, err := Config{BrokerConfigs: s}.brokerOverrides()
		return err
	}}, "broker-config", "comma-separated broker config overrides, e.g. num.partitions=3,auto.create.topics.enable=false")
	fs.Var(millisValue{p: &c.TxnMaxTimeout}, "txn-max-timeout-ms", "largest transaction.timeout.ms a producer may ask for")
	fs.Var(choiceValue{p: &c.Authorizer, choices: []string{"none", "acl"}}, "authorizer", "'none' (every request allowed) or 'acl' (Kafka's ACLs; with --broker-config allow.everyone.if.no.acl.found=true, resources no ACL names stay open)")
	fs.Var(checkedString{p: &c.SuperUsers, check: checkSuperUsers}, "super-users", "principals allowed everything with --authorizer acl, Kafka's super.users form: 'User:admin;User:ops'")
	fs.Var(addrValue{p: &c.Pprof, optional: true}, "pprof", "serve Go's pprof on this loopback `host:port`, for profiling")
	fs.Var(intValue[int]{p: &c.MaxConnections, min: 1, max: 1<<31 - 1}, "max-connections", "maximum open client connections")
	fs.Var(intValue[int]{p: &c.MaxConnectionsPerIP, min: 0, max: 1<<31 - 1}, "max-connections-per-ip", "maximum open client connections from one address, across listeners (Kafka's max.connections.per.ip); 0: no bound")
	fs.Var(checkedString{p: &c.MaxConnectionsPerIPOverrides, check: func(s string) error {
		_, err := logconfig.ParseConnectionOverrides(s)
		return err
	}}, "max-connections-per-ip-overrides", "per-address bounds over --max-connections-per-ip, Kafka's max.connections.per.ip.overrides form: '10.0.0.5:500,192.0.2.1:0' (0: none; addresses, not host names)")
	fs.Var(intValue[int]{p: &c.EventLoops, min: 0, max: 1 << 10}, "event-loops", "network event loops of each plaintext (or SASL_PLAINTEXT) listener; 0: half of GOMAXPROCS (at least 1) split among those listeners, leaving the rest of the Ps free for the goroutines the loops wake")
	fs.Var(durationValue{p: &c.IdleTimeout, min: time.Millisecond}, "idle-timeout", "close connections idle this long")
	fs.Var(intValue[int]{p: &c.MaxOpenFiles, min: 0, max: 1<<31 - 1}, "max-open-files", "segment files kept open at once across all partitions (least recently used closed first); 0: 1024, or a quarter of RLIMIT_NOFILE if lower")
	fs.Var(bytesValue{p: &c.DiskReserve}, "disk-reserve", "disk space held back in DATA/meta/disk-reserve (`size`; 0: none) so that on a full disk a topic deletion, DeleteRecords or retention can still make the write that lets segments go; once used, appends are refused until it is made again")
	fs.Var(intValue[int]{p: &c.MaxPartitions, min: 100, max: 1 << 30}, "max-partitions", "partitions of all topics together (about 8 KiB of memory and a directory each); a CreateTopics, CreatePartitions or auto-creation over it is refused with POLICY_VIOLATION")
	fs.Var(intValue[int]{p: &c.MaxGroups, min: 100, max: 1 << 30}, "max-groups", "consumer and share groups the node's group coordinators hold, divided among them when spread over raft groups (about 1.1 KiB of heap each when idle); a request that would create one more is refused with POLICY_VIOLATION")
	fs.Var(intValue[int]{p: &c.MaxTransactionalIDs, min: 100, max: 1 << 30}, "max-transactional-ids", "transactional ids the node's transaction coordinators hold, divided among them when spread over raft groups (about 1 KiB of heap each); over it, the least recently used idle ids expire early, as at transactional.id.expiration.ms, and a new id is refused with COORDINATOR_NOT_AVAILABLE while none is idle")
	fs.Var(intValue[int64]{p: &c.MaxProducerStates, min: 1000, max: 1 << 40}, "max-producer-states", "producers all partitions together keep idempotence state for (200 bytes to 1 KiB each); over it, a partition holding more than its share drops its least recently active producers, which then count as new")
	fs.Var(bytesValue{p: &c.MaxMemory, min: minMaxMemory}, "max-memory", "memory the network edge and fetches may hold (`size`, e.g. 512MiB, 1GiB): 3/8 for requests read, 3/8 for responses not yet sent, 1/4 for fetch reads; also sets the Go memory limit (1.5x) unless GOMEMLIMIT is set")
	fs.Var(choiceValue{p: &c.OtelExporter, choices: []string{"none", "otlp-grpc", "otlp-http", "stdout"}}, "otel-exporter", "where request traces go: none, otlp-grpc, otlp-http or stdout")
	fs.StringVar(&c.OtelEndpoint, "otel-endpoint", c.OtelEndpoint, "OTLP collector: host:port (plaintext) or URL (https:// for TLS); default: the exporter's, or OTEL_EXPORTER_OTLP_ENDPOINT")
	fs.Var(ratioValue{p: &c.OtelSampleRatio}, "otel-sample-ratio", "share of requests traced, 0..1, parent-based")
	fs.Var(choiceValue{p: &c.ClientTelemetryExporter, choices: []string{"none", "otlp-grpc", "otlp-http"}}, "client-telemetry-exporter", "where clients' pushed metrics (KIP-714) go: none, otlp-grpc or otlp-http; default: --otel-exporter's when it is OTLP, else none (GetTelemetrySubscriptions and PushTelemetry then not advertised)")
	fs.StringVar(&c.ClientTelemetryEndpoint, "client-telemetry-endpoint", c.ClientTelemetryEndpoint, "OTLP metrics receiver for clients' metrics: host:port or URL; default: --otel-endpoint")
	fs.Var(intValue[int32]{p: &c.TelemetryMaxBytes, min: 1, max: 1<<31 - 1}, "telemetry-max-bytes", "largest client telemetry push accepted, as sent (Kafka's telemetry.max.bytes)")
	fs.Var(addrValue{p: &c.MetricsListen, optional: true}, "metrics-listen", "`host:port` serving Prometheus metrics at /metrics; empty: off")
	fs.Var(intValue[int32]{p: &c.NodeID, min: 1, max: 1<<31 - 1}, "node-id", "this node's id, unique in the cluster")
	fs.Var(addrValue{p: &c.RaftListen, optional: true}, "raft-listen", "`host:port` of the raft transport; setting it runs the node in cluster mode")
	fs.Var(checkedString{p: &c.Peers, check: func(s string) error {
		_, err := parsePeers(s)
		return err
	}}, "peers", "initial voters, id=kafka-host:port/raft-host:port/admin-host:port, comma-separated; the same on every initial node")
	fs.Var(boolValue{p: &c.Join}, "join", "a new node: wait to be added with 'regent cluster add-voter' instead of bootstrapping")
	fs.Var(uintValue{p: &c.RaftSnapshotThreshold}, "raft-snapshot-threshold", "raft entries between snapshots; 0: 8192")
	fs.Var(durationValue{p: &c.RaftSnapshotInterval}, "raft-snapshot-interval", "how often raft checks whether to snapshot; 0: 2m")
	fs.Var(uintValue{p: &c.RaftTrailingLogs}, "raft-trailing-logs", "raft entries kept after a snapshot, for followers that fall behind; 0: 1024")
	fs.Var(bytesValue{p: &c.RaftSnapshotBytes}, "raft-snapshot-bytes", "also snapshot once this many entry bytes were applied since the last snapshot, bounding what a restart replays (`size`); 0: 256MiB")
	fs.Var(intValue[int]{p: &c.RaftGroups, min: 0, max: topics.MaxPartitionGroups}, "raft-groups", "partition raft groups beside the metadata group, sharing the raft port: each new partition is placed on one, whose leader leads it, and leaders are spread over the nodes; 0: the metadata group leads every partition. The same on every node, for the cluster's life")
	fs.Var(addrValue{p: &c.AdminListen, optional: true}, "admin-listen", "`host:port` of the HTTP admin endpoint (cluster status and membership)")
	fs.Var(checkedString{p: &c.Rack, check: checkRack}, "rack", "this node's rack (Kafka's broker.rack), reported in Metadata; on a cluster's nodes it turns on reads from followers: a consumer whose client.rack is a follower's rack reads from that follower (KIP-392)")
	return fs
}

// parseConfig reads the command line, then the environment twins of the
// flags it did not set, then validates the whole. An error wraps
// usageError (wrapping flag.ErrHelp for -h).
func parseConfig(args []string, getenv func(string) string) (Config, error) {
	c := DefaultConfig()
	fs := newFlagSet(&c)
	if err := fs.Parse(args); err != nil {
		return c, usageError{err}
	}
	if fs.NArg() > 0 {
		return c, usageError{fmt.Errorf("unexpected argument %q (the commands are cluster and version)", fs.Arg(0))}
	}
	if err := applyEnv(fs, getenv); err != nil {
		return c, usageError{err}
	}
	if err := c.settleTxnMaxTimeout(); err != nil {
		return c, usageError{err}
	}
	return c, c.Validate()
}

// checkRack accepts a rack name as Kafka prints and compares it: up to 255
// printable characters.
func checkRack(s string) error {
	if len(s) > 255 {
		return fmt.Errorf("rack %.20q...: longer than 255 bytes", s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("rack %q: has a character that does not print", s)
		}
	}
	return nil
}
