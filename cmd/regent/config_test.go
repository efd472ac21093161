package main

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regent-broker/regent/storage/logconfig"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"REGENT_LISTEN": "127.0.0.1:9999", "REGENT_DATA": "/tmp/envdata", "REGENT_FLUSH_INTERVAL": "250ms"}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig(nil, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9999" || c.DataDir != "/tmp/envdata" || c.FlushInterval != 250*time.Millisecond {
		t.Fatalf("env not applied: %+v", c)
	}
	c, err = parseConfig([]string{"--listen", "127.0.0.1:1234", "--data", "d", "--broker-config", "num.partitions=3, auto.create.topics.enable=false"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:1234" || c.DataDir != "d" {
		t.Fatalf("flags must win over env: %+v", c)
	}
	o, _ := c.brokerOverrides()
	if o["num.partitions"] != "3" || o["auto.create.topics.enable"] != "false" {
		t.Fatalf("broker overrides: %v", o)
	}
	def, err := parseConfig(nil, func(string) string { return "" })
	if err != nil || def.Listen != "127.0.0.1:9092" || def.DataDir != "./data" {
		t.Fatalf("zero-config defaults: %+v %v", def, err)
	}
	for _, bad := range [][]string{{"--listen", "nope"}, {"--fsync", "sometimes"}, {"--broker-config", "novalue"}, {"--listen", "127.0.0.1:0"}} {
		if _, err := parseConfig(bad, func(string) string { return "" }); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}

// validEnv and invalidEnv hold, for every flag, a value its environment
// twin accepts (different from the default) and one it must refuse. A new
// flag fails TestEveryFlagHasAnEnvTwin until it is added here.
var validEnv = map[string]string{
	"client-telemetry-exporter":        "otlp-http",
	"client-telemetry-endpoint":        "http://127.0.0.1:4318",
	"telemetry-max-bytes":              "65536",
	"listen":                           "127.0.0.1:19092",
	"advertise":                        "broker.example:9092",
	"data":                             "/tmp/regent-env",
	"fsync":                            "always",
	"flush-interval":                   "250ms",
	"retention-check-interval":         "5s",
	"compaction-check-interval":        "2s",
	"log-level":                        "debug",
	"log-format":                       "json",
	"broker-config":                    "num.partitions=3",
	"txn-max-timeout-ms":               "60000",
	"authorizer":                       "acl",
	"super-users":                      "User:admin;User:ops",
	"pprof":                            "127.0.0.1:6060",
	"max-connections":                  "50",
	"max-connections-per-ip":           "20",
	"max-connections-per-ip-overrides": "127.0.0.1:100,::1:0",
	"idle-timeout":                     "1m",
	"event-loops":                      "2",
	"max-memory":                       "1GiB",
	"max-producer-states":              "50000",
	"max-transactional-ids":            "5000",
	"max-groups":                       "5000",
	"max-partitions":                   "5000",
	"max-open-files":                   "2048",
	"disk-reserve":                     "16MiB",
	"otel-exporter":                    "stdout",
	"otel-endpoint":                    "127.0.0.1:4317",
	"otel-sample-ratio":                "0.25",
	"metrics-listen":                   "127.0.0.1:9464",
	"node-id":                          "7",
	"raft-listen":                      "127.0.0.1:19093",
	"peers":                            "7=127.0.0.1:19092/127.0.0.1:19093",
	"join":                             "true",
	"raft-snapshot-threshold":          "64",
	"raft-snapshot-interval":           "300ms",
	"raft-trailing-logs":               "16",
	"raft-snapshot-bytes":              "64MiB",
	"raft-groups":                      "6",
	"admin-listen":                     "127.0.0.1:19300",
	"rack":                             "eu-west-1a",
	"listeners":                        "PLAINTEXT://127.0.0.1:19092,SASL_PLAINTEXT://127.0.0.1:19094",
	"advertised-listeners":             "PLAINTEXT://broker.example:9092",
	"sasl-mechanisms":                  "SCRAM-SHA-512",
	"sasl-oauthbearer-jwks":            "/etc/regent/jwks.json",
	"sasl-oauthbearer-issuer":          "https://issuer.example",
	"sasl-oauthbearer-audience":        "regent",
	"connections-max-reauth-ms":        "60000",
	"tls-cert":                         "/etc/regent/server.pem",
	"tls-key":                          "/etc/regent/server-key.pem",
	"tls-client-ca":                    "/etc/regent/clients-ca.pem",
	"tls-client-auth":                  "required",
	"cluster-tls-cert":                 "/etc/regent/node.pem",
	"cluster-tls-key":                  "/etc/regent/node-key.pem",
	"cluster-tls-ca":                   "/etc/regent/cluster-ca.pem",
	"cluster-secret-file":              "/etc/regent/cluster.secret",
	"cluster-secret-accept-file":       "/etc/regent/cluster.secret.old",

	"sasl-oauthbearer-unsecured":      "true",
	"sasl-oauthbearer-sub-claim":      "client_id",
	"sasl-oauthbearer-scope-claim":    "scp",
	"sasl-oauthbearer-required-scope": "kafka,write",
}

// invalidEnv: free-form flags (data, otel-endpoint) have no invalid
// non-empty value; an empty variable counts as unset.
var invalidEnv = map[string]string{
	"listen":                           "nope",
	"disk-reserve":                     "lots",
	"advertise":                        "host-without-port",
	"fsync":                            "sometimes",
	"flush-interval":                   "soon",
	"retention-check-interval":         "0s",
	"compaction-check-interval":        "0s",
	"log-level":                        "loud",
	"log-format":                       "xml",
	"broker-config":                    "novalue",
	"txn-max-timeout-ms":               "0",
	"authorizer":                       "ranger",
	"super-users":                      "admin",
	"pprof":                            "127.0.0.1",
	"max-connections":                  "many",
	"max-connections-per-ip":           "-1",
	"max-connections-per-ip-overrides": "localhost:5",
	"idle-timeout":                     "-1s",
	"event-loops":                      "-1",
	"max-memory":                       "12x",
	"max-producer-states":              "999",
	"max-transactional-ids":            "99",
	"max-groups":                       "99",
	"max-partitions":                   "99",
	"max-open-files":                   "lots",
	"otel-exporter":                    "zipkin",
	"client-telemetry-exporter":        "zipkin",
	"telemetry-max-bytes":              "0",
	"otel-sample-ratio":                "2",
	"metrics-listen":                   "127.0.0.1:0",
	"node-id":                          "0",
	"raft-listen":                      ":99999",
	"peers":                            "x",
	"join":                             "yes",
	"raft-snapshot-threshold":          "-1",
	"raft-snapshot-interval":           "often",
	"raft-trailing-logs":               "1e3",
	"raft-groups":                      "256",
	"listeners":                        "HTTP://127.0.0.1:80",
	"advertised-listeners":             "PLAINTEXT://nohost",
	"sasl-mechanisms":                  "GSSAPI",
	"connections-max-reauth-ms":        "-5",
	"admin-listen":                     "admin",
	"rack":                             "a\tb",
	"tls-client-auth":                  "optional",

	"sasl-oauthbearer-unsecured": "maybe",
}

func noEnv(string) string { return "" }

func TestEveryFlagHasAnEnvTwin(t *testing.T) {
	def := DefaultConfig()
	names := map[string]bool{}
	newFlagSet(&def).VisitAll(func(f *flag.Flag) {
		names[f.Name] = true
		v, ok := validEnv[f.Name]
		if !ok {
			t.Errorf("--%s: no sample value in validEnv", f.Name)
			return
		}
		env := envName(f.Name)
		c := DefaultConfig()
		fs := newFlagSet(&c)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(fs, func(k string) string {
			if k == env {
				return v
			}
			return ""
		}); err != nil {
			t.Errorf("%s=%q: %v", env, v, err)
			return
		}
		if reflect.DeepEqual(c, DefaultConfig()) {
			t.Errorf("%s=%q changed nothing", env, v)
		}
		if got := fs.Lookup(f.Name).Value.String(); got != v && f.Name != "txn-max-timeout-ms" {
			// String prints the value back (durations in Go's form).
			if d, err := time.ParseDuration(v); err != nil || got != d.String() {
				t.Errorf("%s=%q: --%s is %q", env, v, f.Name, got)
			}
		}
	})
	for name := range validEnv {
		if !names[name] {
			t.Errorf("validEnv names --%s, which does not exist", name)
		}
	}
	// The flags the issue found without a twin.
	for _, name := range []string{"max-connections", "raft-snapshot-threshold", "raft-snapshot-interval", "raft-trailing-logs"} {
		if !names[name] {
			t.Errorf("--%s is gone", name)
		}
	}
}

func TestTwinsReachTheConfig(t *testing.T) {
	env := map[string]string{
		"REGENT_MAX_CONNECTIONS":         "50",
		"REGENT_RAFT_LISTEN":             "127.0.0.1:19093",
		"REGENT_PEERS":                   "7=127.0.0.1:19092/127.0.0.1:19093",
		"REGENT_NODE_ID":                 "7",
		"REGENT_RAFT_SNAPSHOT_THRESHOLD": "64",
		"REGENT_RAFT_SNAPSHOT_INTERVAL":  "300ms",
		"REGENT_RAFT_TRAILING_LOGS":      "16",
		"REGENT_TXN_MAX_TIMEOUT_MS":      "60000",
	}
	c, err := parseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConnections != 50 || c.NodeID != 7 || c.RaftSnapshotThreshold != 64 || c.RaftSnapshotInterval != 300*time.Millisecond || c.RaftTrailingLogs != 16 || c.TxnMaxTimeout != time.Minute {
		t.Fatalf("twins not applied: %+v", c)
	}
	// The command line wins over the environment.
	c, err = parseConfig([]string{"--max-connections", "9", "--raft-trailing-logs", "0"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConnections != 9 || c.RaftTrailingLogs != 0 || c.RaftSnapshotThreshold != 64 {
		t.Fatalf("flags must win over env: %+v", c)
	}
}

func TestInvalidEnvValueIsAnErrorNamingIt(t *testing.T) {
	for name, v := range invalidEnv {
		env := envName(name)
		_, err := parseConfig(nil, func(k string) string {
			if k == env {
				return v
			}
			return ""
		})
		if err == nil {
			t.Errorf("%s=%q accepted", env, v)
			continue
		}
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%q: error %q does not name the variable", env, v, err)
		}
		// The same value as a flag is refused too, naming the flag.
		if _, err := parseConfig([]string{"--" + name + "=" + v}, noEnv); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("--%s=%q: %v", name, v, err)
		}
	}
	// Every error is reported, not just the first.
	_, err := parseConfig(nil, func(k string) string {
		return map[string]string{"REGENT_JOIN": "yes", "REGENT_FSYNC": "never"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "REGENT_JOIN") || !strings.Contains(err.Error(), "REGENT_FSYNC") {
		t.Fatalf("two bad variables: %v", err)
	}
}

func TestHelpExitsZeroAndNamesTheCommands(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var out, errOut bytes.Buffer
		if code := regent([]string{arg}, noEnv, &out, &errOut); code != 0 {
			t.Fatalf("regent %s: exit %d, stderr %q", arg, code, errOut.String())
		}
		for _, want := range []string{"regent cluster", "regent version", "--max-connections", "REGENT_MAX_CONNECTIONS", "REGENT_RAFT_SNAPSHOT_THRESHOLD", "default 127.0.0.1:9092"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("regent %s does not mention %q:\n%s", arg, want, out.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := regent([]string{"--no-such-flag"}, noEnv, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "no-such-flag") {
		t.Fatalf("unknown flag: exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := regent(nil, func(k string) string { return map[string]string{"REGENT_MAX_CONNECTIONS": "abc"}[k] }, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "REGENT_MAX_CONNECTIONS") {
		t.Fatalf("bad environment: exit %d, stderr %q", code, errOut.String())
	}
}

func TestVersion(t *testing.T) {
	run := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := regent([]string{"version"}, noEnv, &out, &errOut); code != 0 {
			t.Fatalf("regent version: exit %d, stderr %q", code, errOut.String())
		}
		return out.String()
	}
	// Built without VCS stamping (GOFLAGS=-buildvcs=false, as tests are
	// here) the commit is unknown; with it, a revision.
	got := run()
	if !regexp.MustCompile(`^regent \S+ commit ([0-9a-f]{7,}( \(modified\))?|unknown) go`).MatchString(got) {
		t.Fatalf("regent version: %q", got)
	}
	// What -ldflags "-X main.version=... -X main.commit=..." sets wins.
	oldV, oldC := version, commit
	t.Cleanup(func() { version, commit = oldV, oldC })
	version, commit = "v1.2.3", "0123456789abcdef"
	if got := run(); !strings.HasPrefix(got, "regent v1.2.3 commit 0123456789abcdef go") {
		t.Fatalf("regent version with ldflags: %q", got)
	}
}

// TestTxnMaxTimeoutOneValue: --txn-max-timeout-ms and the broker config
// transaction.max.timeout.ms are one value, the one enforced and reported.
func TestTxnMaxTimeoutOneValue(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		args     []string
		want     time.Duration
		reported string // "" : not overridden, the default is reported
	}{
		{nil, time.Hour, ""},
		{[]string{"--txn-max-timeout-ms", "60000"}, time.Minute, "60000"},
		{[]string{"--broker-config", "transaction.max.timeout.ms=120000"}, 2 * time.Minute, "120000"},
		{[]string{"--txn-max-timeout-ms", "60000", "--broker-config", "transaction.max.timeout.ms=60000"}, time.Minute, "60000"},
	} {
		c, err := parseConfig(tc.args, none)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		o, _ := c.brokerOverrides()
		if c.TxnMaxTimeout != tc.want || o["transaction.max.timeout.ms"] != tc.reported {
			t.Fatalf("%v: enforced %v reported %q, want %v %q", tc.args, c.TxnMaxTimeout, o["transaction.max.timeout.ms"], tc.want, tc.reported)
		}
	}
	for _, bad := range [][]string{
		{"--txn-max-timeout-ms", "60000", "--broker-config", "transaction.max.timeout.ms=120000"},
		{"--broker-config", "transaction.max.timeout.ms=0"},
		{"--broker-config", "transaction.max.timeout.ms=soon"},
	} {
		if _, err := parseConfig(bad, none); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
	if d, _ := logconfig.LookupBroker("transaction.max.timeout.ms"); d.Default != strconv.FormatInt(DefaultConfig().TxnMaxTimeout.Milliseconds(), 10) {
		t.Fatalf("reported default %s, enforced default %v", d.Default, DefaultConfig().TxnMaxTimeout)
	}
}

// TestTxnIDExpiration: --broker-config transactional.id.expiration.ms is
// what the transaction coordinator is given; absent, Kafka's seven days;
// a bad value is refused at start.
func TestTxnIDExpiration(t *testing.T) {
	for _, c := range []struct {
		broker string
		want   time.Duration
		bad    bool
	}{
		{"", 7 * 24 * time.Hour, false},
		{"transactional.id.expiration.ms=60000", time.Minute, false},
		{"transactional.id.expiration.ms=0", 0, true},
		{"transactional.id.expiration.ms=x", 0, true},
	} {
		cfg := DefaultConfig()
		cfg.BrokerConfigs = c.broker
		got, err := cfg.txnIDExpiration()
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%q: %v, %v; want %v (error %v)", c.broker, got, err, c.want, c.bad)
		}
		if verr := cfg.Validate(); c.bad && verr == nil {
			t.Errorf("%q: Validate accepted it", c.broker)
		}
	}
}

// TestConnectionFlagsAreBrokerConfigs: the connection flags are the
// connection keys' values given at start; a disagreeing --broker-config
// and a per-address bound of 0 without overrides are refused.
func TestConnectionFlagsAreBrokerConfigs(t *testing.T) {
	c := Config{MaxConnections: 500, MaxConnectionsPerIP: 3, MaxConnectionsPerIPOverrides: "10.0.0.1:5"}
	o, err := c.brokerOverrides()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"max.connections": "500", "max.connections.per.ip": "3", "max.connections.per.ip.overrides": "10.0.0.1:5"} {
		if o[k] != want {
			t.Errorf("%s = %q, want %q", k, o[k], want)
		}
	}
	if o, _ := (Config{MaxConnections: 10000}).brokerOverrides(); len(o) != 0 {
		t.Errorf("defaults became overrides: %v", o)
	}
	if _, err := (Config{MaxConnections: 500, BrokerConfigs: "max.connections=600"}).brokerOverrides(); err == nil {
		t.Error("--max-connections 500 and max.connections=600 accepted together")
	}
	if _, err := (Config{BrokerConfigs: "max.connections.per.ip=0"}).brokerOverrides(); err == nil {
		t.Error("max.connections.per.ip=0 without overrides accepted")
	}
}

// TestReplicaLagMax: --broker-config replica.lag.time.max.ms is how long
// the raft leader keeps a voter it has not seen caught up in the ISR;
// absent, Kafka's 30 s; a bad value is refused at start.
func TestReplicaLagMax(t *testing.T) {
	for _, c := range []struct {
		broker string
		want   time.Duration
		bad    bool
	}{
		{"", 30 * time.Second, false},
		{"replica.lag.time.max.ms=1500", 1500 * time.Millisecond, false},
		{"replica.lag.time.max.ms=0", 0, true},
		{"replica.lag.time.max.ms=soon", 0, true},
	} {
		cfg := DefaultConfig()
		cfg.BrokerConfigs = c.broker
		got, err := cfg.replicaLagMax()
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%q: %v, %v; want %v (error %v)", c.broker, got, err, c.want, c.bad)
		}
		if verr := cfg.Validate(); c.bad && verr == nil {
			t.Errorf("%q: Validate accepted it", c.broker)
		}
	}
}
