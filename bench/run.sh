#!/usr/bin/env bash
# bench/run.sh: Regent against Apache Kafka's own broker, one run, same machine,
# same load generators (Kafka's ProducerPerformance, ConsumerPerformance and
# EndToEndLatency).
#
#   bench/run.sh [--records N] [--record-size B] [--partitions P] [--rounds R]
#                [--latency-records N] [--fsync-records N] [--idle-timeout S]
#                [--only regent|kafka] [--regent-nodes N] [--security MODE]
#                [--step-timeout S] [--keep]
#
# See bench/README.md for what is measured and the caveats.
set -uo pipefail # no -e: a failure against one broker must not abort the other

usage() {
  cat <<'EOF'
usage: bench/run.sh [options]
  --records N        records per producer run, for the consumer, and in all for
                     the 4x4 workload (default 1000000)
  --record-size B    record value size in bytes (default 1024)
  --partitions P     partitions of the produce, consume and fsync topics
                     (default 3; the 4x4 workload always uses 24)
  --latency-records N  records EndToEndLatency sends one at a time
                     (default 10000, at most --records)
  --fsync-records N  records of the fsync-every-write run (default --records: at
                     a quarter of it the producer JVM's warm-up was half its CPU)
  --idle-timeout S   seconds a 4x4 consumer waits for its next record before it
                     stops (default 30); it counts from the consumer's start too,
                     so raise it when the machine is loaded
  --rounds R         repeat the whole comparison R times, alternating which broker
                     goes first, and report medians (default 1)
  --only WHICH       run only one half: regent or kafka (default both)
  --regent-nodes N   also run Regent as an N-node raft cluster on this machine,
                     topics replicated to all N, after the single node in the same
                     round: the table gets a column for it and the cluster/single
                     acks=all ratio (default 1: the single node only); Kafka stays
                     a single node
  --security MODE    plaintext (default), ssl (TLS only) or sasl_ssl (TLS and
                     SASL SCRAM-SHA-512): how the clients reach both brokers;
                     a throwaway CA and certificate for 127.0.0.1 are made in
                     the work dir (needs openssl)
  --step-timeout S   upper bound in seconds for every single step (default 600)
  --keep             keep the work dir (broker data and logs) instead of deleting it
  -h, --help         this text
Environment: JAVA (default java), GO (default go), REGENT_BIN (use this regent
binary instead of building ./cmd/regent), REGENT_ARGS (extra flags for regent),
KAFKA_HEAP (default -Xms1g -Xmx1g), TMPDIR (where the work dir goes).
EOF
}

records=1000000
record_size=1024
partitions=3
latency_records=""
fsync_records=""
idle_timeout=30
rounds=1
only=both
regent_nodes=1
security=plaintext
step_timeout=600
keep=0
start_timeout=90 # seconds for a broker to open its port

run_args="" # the arguments as given, for RESULTS.md
(($#)) && run_args=$(printf '%q ' "$@") && run_args=${run_args% }
load_start=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
# Free page reporting (a virtual machine's kernel handing freed memory back
# to its host): report.sh says how much went back during the run.
reported_kib_file=/sys/module/page_reporting/parameters/reported_kib
reported_kib_start=$(cat "$reported_kib_file" 2>/dev/null)
need_arg() { [[ $# -ge 2 && -n $2 ]] || { echo "bench: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --records) need_arg "$@"; records=$2; shift 2 ;;
    --record-size) need_arg "$@"; record_size=$2; shift 2 ;;
    --partitions) need_arg "$@"; partitions=$2; shift 2 ;;
    --latency-records) need_arg "$@"; latency_records=$2; shift 2 ;;
    --fsync-records) need_arg "$@"; fsync_records=$2; shift 2 ;;
    --idle-timeout) need_arg "$@"; idle_timeout=$2; shift 2 ;;
    --rounds) need_arg "$@"; rounds=$2; shift 2 ;;
    --only) need_arg "$@"; only=$2; shift 2 ;;
    --regent-nodes) need_arg "$@"; regent_nodes=$2; shift 2 ;;
    --security) need_arg "$@"; security=$2; shift 2 ;;
    --step-timeout) need_arg "$@"; step_timeout=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
latency_records=${latency_records:-$((records < 10000 ? records : 10000))}
fsync_records=${fsync_records:-$records}
for v in records record_size partitions rounds step_timeout regent_nodes latency_records fsync_records idle_timeout; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench: --${v//_/-} must be a positive integer" >&2; exit 2; }
done
case $only in both | regent | kafka) ;; *) echo "bench: --only must be regent or kafka" >&2; exit 2 ;; esac
case $security in plaintext | ssl | sasl_ssl) ;; *) echo "bench: --security must be plaintext, ssl or sasl_ssl" >&2; exit 2 ;; esac
# A cluster's nodes would each need the TLS listener in --peers and, for SCRAM,
# a user made through a listener without SASL (`regent users add` refuses a
# cluster node's directory): not wired up, so refuse rather than half-measure.
if ((regent_nodes > 1)) && [[ $security != plaintext ]]; then
  echo "bench: --security $security runs only with --regent-nodes 1" >&2; exit 2
fi

JAVA=${JAVA:-java}
GO=${GO:-go}
KAFKA_HEAP=${KAFKA_HEAP:--Xms1g -Xmx1g}
bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(cd "$bench_dir/.." && pwd)
cache=$bench_dir/.cache
kafka_lib=${KAFKA_LIB:-$cache/kafka-lib}
log4j_conf=$bench_dir/log4j2.properties

work=$(mktemp -d "${TMPDIR:-/tmp}/regent-bench.XXXXXX") || exit 1

# ---------------------------------------------------------------- cleanup ----
server_pid=""  # the broker currently running, if any
cluster_pids=() # the cluster's nodes while they run
child_pid=""   # the client step currently running (a `timeout` process)
bg_pids=()     # the 4x4 workload's clients while they run (`timeout` processes)

# drop_data DIR...: a stopped broker's data goes at once unless --keep:
# three rounds of 1 KiB x 1M records on five brokers (single, fsync, three
# cluster nodes) and Kafka would otherwise hold tens of GB until the end.
drop_data() {
  ((keep)) && return 0
  rm -rf "$@"
}

stop_pid() { # stop_pid PID: TERM, wait up to 30 s, then KILL
  local pid=$1 i
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "bench: pid $pid did not stop in 30 s, killing it" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  return 0
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  trap - EXIT INT TERM
  stop_pid "$child_pid"; child_pid=""
  local pid
  for pid in "${bg_pids[@]}"; do stop_pid "$pid"; done
  bg_pids=()
  for pid in "${cluster_pids[@]}"; do stop_pid "$pid"; done
  cluster_pids=()
  stop_pid "$server_pid"; server_pid=""
  if ((keep)); then
    echo "bench: work dir kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT
trap 'echo "bench: terminated" >&2; exit 143' TERM

# ---------------------------------------------------------------- helpers ----
say() { echo "bench: $*"; }

now_ms() { date +%s%3N; }

# free_ports [N]: N (default 2) distinct free TCP ports on 127.0.0.1, from
# one call: ports picked in separate calls can coincide (a 3-node cluster's
# node once got another node's admin port and exited, "address already in
# use").
free_ports() {
  local n=${1:-2} py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1; then
      "$py" -c '
import socket, sys
ss = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$n" && return 0
    fi
  done
  # Fallback: consecutive random high ports that nobody is listening on.
  local a i busy
  while :; do
    a=$((20000 + RANDOM % 30000)) busy=
    for ((i = 0; i < n; i++)); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$((a + i))") 2>/dev/null; then busy=1; break; fi
    done
    [[ -n $busy ]] && continue
    seq -s ' ' "$a" $((a + n - 1)); return 0
  done
}

# wait_port PORT PID LOG: poll until PORT accepts connections, PID dies or the
# start deadline passes.
wait_port() {
  local port=$1 pid=$2 log=$3 deadline=$(($(now_ms) + start_timeout * 1000))
  while (($(now_ms) < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "bench: server exited before opening port $port; last lines of $log:" >&2
      tail -n 30 "$log" >&2
      return 1
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "bench: port $port not open after ${start_timeout}s; last lines of $log:" >&2
  tail -n 30 "$log" >&2
  return 1
}

# run_step LOG CMD...: run a client bounded by --step-timeout, output to LOG.
# Runs in the background so the INT/TERM traps can stop it.
run_step() {
  local log=$1 rc; shift
  timeout -k 10 "$step_timeout" "$@" >"$log" 2>&1 &
  child_pid=$!
  wait "$child_pid"; rc=$?
  child_pid=""
  if ((rc == 124)); then echo "bench: step timed out after ${step_timeout}s: see $log" >&2; fi
  return "$rc"
}

# kjava LOGFILE: sets KJ to the command prefix of a JVM on the Kafka classpath
# that logs to LOGFILE (an array, so `timeout` can exec it).
KJ=()
kjava() {
  KJ=("$JAVA" -Djava.awt.headless=true -Dlog4j2.configurationFile="$log4j_conf"
    -Dbench.log.file="$1" -cp "$kafka_lib/*")
}

step_failed() { # step_failed WHAT LOG
  echo "bench: [$cur] $1 failed; last lines of $2:" >&2
  tail -n 25 "$2" >&2
  if [[ -n $server_pid ]] && ! kill -0 "$server_pid" 2>/dev/null; then
    echo "bench: [$cur] the broker has exited; last lines of $server_log:" >&2
    tail -n 25 "$server_log" >&2
  fi
  failures=$((failures + 1))
}

declare -A res # res[<broker>:<metric>] = space-separated values, one per round
put() { res[$1]="${res[$1]:+${res[$1]} }$2"; }
failures=0
cur=""
server_log=""
# broker_pids[i]: the broker processes bench_broker measures (node i; one
# entry for a single node). Set by run_* before they call bench_broker.
declare -a broker_pids=()
clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)

# proc_sample PID: "WRITE_BYTES CPU_TICKS" of a running process: the bytes it
# caused to be written to storage (/proc/PID/io write_bytes, counted when the
# page is dirtied, so page-cache writes count as soon as they are made) and its
# utime+stime (/proc/PID/stat fields 14 and 15; cut after the last ')', since
# the command name may hold spaces). "0 0" when the process is gone.
proc_sample() {
  local wb st
  wb=$(awk '/^write_bytes:/ { print $2 }' "/proc/$1/io" 2>/dev/null)
  st=$(sed -E 's/^.*\) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }')
  echo "${wb:-0} ${st:-0}"
}

# peak_rss_mb PID: the process's peak resident set so far (VmHWM), in MB.
peak_rss_mb() {
  awk '/^VmHWM:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$1/status" 2>/dev/null
}

# --------------------------------------------------------------- security ---
# setup_security: for ssl and sasl_ssl, a throwaway CA and a server certificate
# for 127.0.0.1 (both brokers serve the same one), and the client config file
# every tool is given. Sets client_conf (the tools' extra arguments) and, for
# sasl_ssl, sasl_user / sasl_password (the one SCRAM-SHA-512 user both brokers
# get before they start).
tls_dir=""
client_conf=()
sasl_user=bench
sasl_password=""
# The clients offer only TLS 1.3 with AES-128-GCM: left to choose, Go's server
# picks AES-128-GCM and Java's (Kafka) AES-256-GCM, which would make the two
# halves pay for different ciphers.
tls_protocol=TLSv1.3
tls_cipher=TLS_AES_128_GCM_SHA256
setup_security() {
  [[ $security == plaintext ]] && return 0
  command -v openssl >/dev/null || { echo "bench: --security $security needs openssl" >&2; return 1; }
  tls_dir=$work/tls
  mkdir -p "$tls_dir"
  local out=$tls_dir/openssl.out
  # Java checks the server's name against the certificate (its default
  # ssl.endpoint.identification.algorithm=https), hence the IP SAN.
  printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' 'basicConstraints=CA:FALSE' \
    'keyUsage=digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' >"$tls_dir/server.ext"
  if ! { openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=regent-bench CA' \
      -keyout "$tls_dir/ca-key.pem" -out "$tls_dir/ca.pem" &&
    openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' \
      -keyout "$tls_dir/server-key.pem" -out "$tls_dir/server.csr" &&
    openssl x509 -req -in "$tls_dir/server.csr" -CA "$tls_dir/ca.pem" -CAkey "$tls_dir/ca-key.pem" \
      -CAcreateserial -days 2 -extfile "$tls_dir/server.ext" -out "$tls_dir/server.pem"; } >"$out" 2>&1; then
    echo "bench: making the test certificates failed:" >&2
    tail -n 20 "$out" >&2
    return 1
  fi
  # Kafka's PEM key store: the PKCS#8 key and the certificate chain in one file.
  cat "$tls_dir/server-key.pem" "$tls_dir/server.pem" >"$tls_dir/server-keystore.pem"
  local conf=$work/client.properties
  {
    echo "security.protocol=${security^^}"
    echo "ssl.truststore.type=PEM"
    echo "ssl.truststore.location=$tls_dir/ca.pem"
    echo "ssl.enabled.protocols=$tls_protocol"
    echo "ssl.cipher.suites=$tls_cipher"
  } >"$conf"
  if [[ $security == sasl_ssl ]]; then
    sasl_password=$(openssl rand -hex 16)
    printf '%s\n' "$sasl_password" >"$tls_dir/password"
    {
      echo "sasl.mechanism=SCRAM-SHA-512"
      echo "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"$sasl_user\" password=\"$sasl_password\";"
    } >>"$conf"
  fi
  client_conf=(--command-config "$conf")
}

security_line() { # how the clients reached the brokers, for the report
  case $security in
    plaintext) echo "security: plaintext (no TLS, no SASL)" ;;
    ssl) echo "security: ssl, clients over $tls_protocol $tls_cipher, server certificate RSA 2048, no client certificates, no SASL" ;;
    sasl_ssl) echo "security: sasl_ssl, clients over $tls_protocol $tls_cipher, server certificate RSA 2048, SASL SCRAM-SHA-512 (4096 iterations), no ACLs" ;;
  esac
}

# The workload (bench_broker, phase_fsync) is in phases.sh, the table in report.sh.
# shellcheck source=bench/phases.sh
source "$bench_dir/phases.sh"
# shellcheck source=bench/report.sh
source "$bench_dir/report.sh"

# ----------------------------------------------------------------- regent ----
regent_bin=${REGENT_BIN:-$cache/regent}
build_regent() {
  cur=regent
  if [[ -n ${REGENT_BIN:-} ]]; then
    [[ -x $REGENT_BIN ]] || { echo "bench: REGENT_BIN=$REGENT_BIN is not executable" >&2; failures=$((failures + 1)); return 1; }
    say "[regent] using REGENT_BIN=$REGENT_BIN (not building)"
    build_commit=$(build_info)
    return 0
  fi
  command -v "$GO" >/dev/null || { echo "bench: go not found (set GO)" >&2; failures=$((failures + 1)); return 1; }
  say "[regent] building ./cmd/regent"
  build_commit=$(build_info)
  if ! run_step "$work/regent-build.out" env -C "$repo_dir" "$GO" build -o "$cache/regent" ./cmd/regent; then
    step_failed "go build ./cmd/regent" "$work/regent-build.out"
    return 1
  fi
}

run_regent() { # run_regent ROUND: the single node, then the cluster if asked
  run_regent_single "$1"
  local rc=$?
  if ((regent_nodes > 1)); then
    run_regent_cluster "$1" || rc=$?
  fi
  return $rc
}

# start_regent DIR DATA FLAGS...: a single-node Regent on a free port with its
# data in DATA, logging to DIR/regent-<basename DATA>.log; sets server_pid,
# server_log and regent_bs.
regent_bs=""
start_regent() {
  local dir=$1 data=$2 port
  shift 2
  mkdir -p "$data"
  read -r port _ <<<"$(free_ports)"
  server_log=$dir/regent-${data##*/}.log
  local -a listen=(--listen "127.0.0.1:$port")
  case $security in
    ssl) listen=(--listeners "SSL://127.0.0.1:$port" --tls-cert "$tls_dir/server.pem" --tls-key "$tls_dir/server-key.pem") ;;
    sasl_ssl)
      listen=(--listeners "SASL_SSL://127.0.0.1:$port" --tls-cert "$tls_dir/server.pem"
        --tls-key "$tls_dir/server-key.pem" --sasl-mechanisms SCRAM-SHA-512)
      # The user goes into the stopped broker's store, as Kafka's goes into
      # its metadata log at format time.
      if ! run_step "$dir/users-add-${data##*/}.out" "$regent_bin" users add "$sasl_user" --mechanism SCRAM-SHA-512 \
          --password-file "$tls_dir/password" --data "$data"; then
        step_failed "regent users add" "$dir/users-add-${data##*/}.out"
        return 1
      fi
      ;;
  esac
  # The same group.initial.rebalance.delay.ms=0 as the Kafka half's
  # server.properties, so group joins compare like with like.
  # shellcheck disable=SC2086 # REGENT_ARGS is a list of flags
  "$regent_bin" "${listen[@]}" --data "$data" \
    --broker-config group.initial.rebalance.delay.ms=0 "$@" ${REGENT_ARGS:-} >"$server_log" 2>&1 &
  server_pid=$!
  say "[regent] started pid $server_pid on 127.0.0.1:$port ($security${*:+, $*})"
  if ! wait_port "$port" "$server_pid" "$server_log"; then
    failures=$((failures + 1))
    stop_pid "$server_pid"; server_pid=""
    return 1
  fi
  broker_pids=([1]="$server_pid")
  regent_bs=127.0.0.1:$port
}

# run_regent_single ROUND: every phase against one node with its default
# fsync policy, then the fsync phase against a fresh one with --fsync always.
run_regent_single() {
  local dir=$work/round$1/regent rc=0
  mkdir -p "$dir"
  cur=regent
  if start_regent "$dir" "$dir/data"; then
    bench_broker regent "$regent_bs" "$dir" || rc=1
    stop_pid "$server_pid"; server_pid=""
    drop_data "$dir/data"
  else
    rc=1
  fi
  if start_regent "$dir" "$dir/data-fsync" --fsync always; then
    phase_fsync regent "$regent_bs" "$dir" 1 || rc=1
    stop_pid "$server_pid"; server_pid=""
    drop_data "$dir/data-fsync"
  else
    rc=1
  fi
  return $rc
}

# run_regent_cluster ROUND: regent_nodes nodes in raft cluster mode, every
# topic replicated to all of them; the load goes to whichever leads.
run_regent_cluster() {
  local dir=$work/round$1/cluster i peers="" bs="" kp rp ap
  local -a kports rports aports pids
  cur=cluster
  mkdir -p "$dir"
  local -a ports
  read -r -a ports <<<"$(free_ports $((3 * regent_nodes)))"
  for ((i = 1; i <= regent_nodes; i++)); do
    kp=${ports[3 * i - 3]} rp=${ports[3 * i - 2]} ap=${ports[3 * i - 1]}
    kports[i]=$kp rports[i]=$rp aports[i]=$ap
    peers+="${peers:+,}$i=127.0.0.1:$kp/127.0.0.1:$rp/127.0.0.1:$ap"
    bs+="${bs:+,}127.0.0.1:$kp"
  done
  # A plaintext admin endpoint needs the cluster secret (the same on every node).
  "$regent_bin" cluster secret >"$dir/cluster.secret"
  for ((i = 1; i <= regent_nodes; i++)); do
    mkdir -p "$dir/data$i"
    # shellcheck disable=SC2086 # REGENT_ARGS is a list of flags
    "$regent_bin" --node-id "$i" --listen "127.0.0.1:${kports[i]}" --raft-listen "127.0.0.1:${rports[i]}" \
      --admin-listen "127.0.0.1:${aports[i]}" --peers "$peers" --data "$dir/data$i" \
      --cluster-secret-file "$dir/cluster.secret" --broker-config group.initial.rebalance.delay.ms=0 ${REGENT_ARGS:-} >"$dir/regent$i.log" 2>&1 &
    pids[i]=$!
  done
  cluster_pids=("${pids[@]}")
  server_pid=${pids[1]} server_log=$dir/regent1.log
  say "[cluster] started a $regent_nodes-node cluster (pids ${pids[*]}) on $bs"
  local ok=1 deadline=$(($(now_ms) + start_timeout * 1000))
  for ((i = 1; i <= regent_nodes; i++)); do
    wait_port "${kports[i]}" "${pids[i]}" "$dir/regent$i.log" || ok=0
  done
  while ((ok)) && ! "$regent_bin" cluster status --admin "127.0.0.1:${aports[1]}" 2>/dev/null | grep -q '"leader_id":[1-9]'; do
    if (($(now_ms) > deadline)); then echo "bench: the cluster elected no leader in ${start_timeout}s" >&2; ok=0; fi
    sleep 0.1
  done
  local rc=1 leader
  if ((ok)); then
    broker_pids=()
    for ((i = 1; i <= regent_nodes; i++)); do broker_pids[i]=${pids[i]}; done
    bench_broker cluster "$bs" "$dir" "$regent_nodes"
    rc=$?
    # Every write is in the raft log, fsynced on a majority, before its
    # answer: the cluster's default is already the fsync-every-write pairing.
    phase_fsync cluster "$bs" "$dir" "$regent_nodes" || rc=1
    # Which node led (and so took the clients' traffic) this round.
    leader=$("$regent_bin" cluster status --admin "127.0.0.1:${aports[1]}" 2>/dev/null | sed -nE 's/.*"leader_id":([0-9]+).*/\1/p' | head -n 1)
    put cluster:leader "${leader:-?}"
  else
    failures=$((failures + 1))
  fi
  for ((i = 1; i <= regent_nodes; i++)); do stop_pid "${pids[i]}"; done
  for ((i = 1; i <= regent_nodes; i++)); do drop_data "$dir/data$i"; done
  server_pid="" cluster_pids=()
  return $rc
}

# ------------------------------------------------------------------ kafka ----
run_kafka() { # run_kafka ROUND
  local dir=$work/round$1/kafka port cport cluster_id
  mkdir -p "$dir/data"
  cur=kafka
  read -r port cport <<<"$(free_ports)"
  local ln=${security^^} # the client listener's name: PLAINTEXT, SSL or SASL_SSL
  cat >"$dir/server.properties" <<EOF
# single-node KRaft, broker and controller in one JVM; the controller
# listener stays PLAINTEXT whatever the clients' listener is
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=$ln://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=$ln://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
listener.security.protocol.map=$ln:$ln,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=$ln
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
  if [[ $security != plaintext ]]; then
    # The same certificate as Regent's; the trust store is for the broker's
    # own inter-broker client (unused on one node, but validated).
    cat >>"$dir/server.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$tls_dir/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls_dir/ca.pem
EOF
  fi
  local -a scram=()
  if [[ $security == sasl_ssl ]]; then
    cat >>"$dir/server.properties" <<EOF
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$sasl_user" password="$sasl_password";
EOF
    scram=(--add-scram "SCRAM-SHA-512=[name=$sasl_user,password=$sasl_password]")
  fi
  kjava "$dir/storage-log4j.log"
  if ! run_step "$dir/uuid.out" "${KJ[@]}" kafka.tools.StorageTool random-uuid; then
    step_failed "kafka-storage random-uuid" "$dir/uuid.out"
    return 1
  fi
  cluster_id=$(tail -n 1 "$dir/uuid.out")
  if ! run_step "$dir/format.out" "${KJ[@]}" kafka.tools.StorageTool format \
      --config "$dir/server.properties" --cluster-id "$cluster_id" --standalone "${scram[@]}"; then
    step_failed "kafka-storage format" "$dir/format.out"
    return 1
  fi
  server_log=$dir/server.out
  kjava "$dir/server-log4j.log"
  # shellcheck disable=SC2086 # KAFKA_HEAP is a list of flags
  "${KJ[@]}" $KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
    kafka.Kafka "$dir/server.properties" >"$server_log" 2>&1 &
  server_pid=$!
  say "[kafka] started Apache Kafka $(kafka_version) pid $server_pid on 127.0.0.1:$port ($security)"
  if ! wait_port "$port" "$server_pid" "$server_log"; then
    failures=$((failures + 1))
    stop_pid "$server_pid"; server_pid=""
    return 1
  fi
  broker_pids=([1]="$server_pid")
  bench_broker kafka "127.0.0.1:$port" "$dir"
  local rc=$?
  # Kafka's durability-equal pairing for Regent's --fsync always: this topic
  # flushes after every append (flush.messages=1, the per-topic form of
  # log.flush.interval.messages=1), on the same broker.
  phase_fsync kafka "127.0.0.1:$port" "$dir" 1 --config flush.messages=1 || rc=1
  stop_pid "$server_pid"; server_pid=""
  drop_data "$dir/data"
  return $rc
}

kafka_version() {
  local j
  j=$(compgen -G "$kafka_lib/kafka_2.13-*.jar" | head -n 1)
  j=${j##*/kafka_2.13-}; echo "${j%.jar}"
}

# -------------------------------------------------------------------- main ---
command -v "$JAVA" >/dev/null || { echo "bench: java not found (set JAVA)" >&2; exit 1; }
command -v timeout >/dev/null || { echo "bench: coreutils timeout not found" >&2; exit 1; }
mkdir -p "$cache"
# The perf tools are Kafka's, so the jars are needed for both halves.
"$bench_dir/fetch-kafka.sh" || { echo "bench: could not resolve the Kafka jars" >&2; exit 1; }
say "work dir $work; $records records x $record_size B, $partitions partitions, security $security;" \
  "EndToEndLatency $latency_records records, fsync phase $fsync_records records"
setup_security || exit 1

regent_ok=0
if [[ $only != kafka ]]; then
  build_regent && regent_ok=1
fi
for ((round = 1; round <= rounds; round++)); do
  ((rounds > 1)) && say "round $round of $rounds"
  # Alternate the order so neither broker always runs on a warmer machine.
  if ((round % 2)); then order="regent kafka"; else order="kafka regent"; fi
  for b in $order; do
    case $b in
      regent) [[ $only != kafka ]] && ((regent_ok)) && run_regent "$round" ;;
      kafka) [[ $only != regent ]] && run_kafka "$round" ;;
    esac
  done
done
report
if ((failures)); then
  echo "bench: $failures step(s) failed" >&2
  exit 1
fi
exit 0
