#!/usr/bin/env bash
# bench/run.sh: Regent against Apache Kafka's own broker, one run, same machine,
# same load generators (Kafka's ProducerPerformance, ConsumerPerformance and
# EndToEndLatency).
#
#   bench/run.sh [--records N] [--record-size B] [--partitions P] [--rounds R]
#                [--latency-records N] [--fsync-records N] [--idle-timeout S]
#                [--only regent|kafka] [--regent-nodes N] [--kafka-brokers N]
#                [--security MODE] [--step-timeout S] [--keep]
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
                     acks=all ratio (default 1: the single node only)
  --kafka-brokers N  also run Kafka as an N-broker KRaft cluster (broker and
                     controller in each JVM) after its single broker in the same
                     round, topics and internal topics at replication factor N,
                     min.insync.replicas 2: the table gets a column for it and a
                     regent xN / kafka xN ratio column (default 1: the single
                     broker only); N must equal --regent-nodes
  --security MODE    plaintext (default), ssl (TLS only) or sasl_ssl (TLS and
                     SASL SCRAM-SHA-512): how the clients reach both brokers;
                     a throwaway CA and certificate for 127.0.0.1 are made in
                     the work dir (needs openssl)
  --step-timeout S   upper bound in seconds for every single step (default 600)
  --keep             keep the work dir (broker data and logs) instead of deleting it
  -h, --help         this text
Environment: JAVA (default java), GO (default go), REGENT_BIN (use this regent
binary instead of building ./cmd/regent), REGENT_ARGS (extra flags for regent),
REGENT_CLUSTER_ARGS (extra flags for the cluster's nodes only, e.g.
"--raft-groups 6"),
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
kafka_brokers=1
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
    --kafka-brokers) need_arg "$@"; kafka_brokers=$2; shift 2 ;;
    --security) need_arg "$@"; security=$2; shift 2 ;;
    --step-timeout) need_arg "$@"; step_timeout=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
latency_records=${latency_records:-$((records < 10000 ? records : 10000))}
fsync_records=${fsync_records:-$records}
for v in records record_size partitions rounds step_timeout regent_nodes kafka_brokers latency_records fsync_records idle_timeout; do
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
# The Kafka cluster is the Regent cluster's counterpart: same node count, so
# the table's per-node rows and the cluster/cluster ratios line up.
if ((kafka_brokers > 1 && kafka_brokers != regent_nodes)); then
  echo "bench: --kafka-brokers $kafka_brokers needs --regent-nodes $kafka_brokers (the clusters are compared node for node)" >&2; exit 2
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
cluster_pids=() # a cluster's nodes (Regent's or Kafka's) while they run
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

# stop_pids PID...: TERM them all at once, wait up to 30 s for all, then KILL
# the rest. A KRaft cluster's nodes go down together, so that none is left
# without a controller quorum for its controlled shutdown (3 brokers stopped
# in 8 to 13 s here).
stop_pids() {
  local pid i alive
  for pid in "$@"; do [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null; done
  for ((i = 0; i < 300; i++)); do
    alive=0
    for pid in "$@"; do
      if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then alive=1; break; fi
    done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "$@"; do
    [[ -n $pid ]] || continue
    if kill -0 "$pid" 2>/dev/null; then
      echo "bench: pid $pid did not stop in 30 s, killing it" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
  done
  return 0
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  trap - EXIT INT TERM
  stop_pid "$child_pid"; child_pid=""
  local pid
  for pid in "${bg_pids[@]}"; do stop_pid "$pid"; done
  bg_pids=()
  stop_pids "${cluster_pids[@]}"
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

# The workload (bench_broker, phase_fsync) is in phases.sh, the table in
# report.sh, Kafka's server.properties and voters in kraft.sh.
# shellcheck source=bench/phases.sh
source "$bench_dir/phases.sh"
# shellcheck source=bench/report.sh
source "$bench_dir/report.sh"
# shellcheck source=bench/kraft.sh
source "$bench_dir/kraft.sh"

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
    # shellcheck disable=SC2086 # REGENT_ARGS and REGENT_CLUSTER_ARGS are lists of flags
    "$regent_bin" --node-id "$i" --listen "127.0.0.1:${kports[i]}" --raft-listen "127.0.0.1:${rports[i]}" \
      --admin-listen "127.0.0.1:${aports[i]}" --peers "$peers" --data "$dir/data$i" \
      --cluster-secret-file "$dir/cluster.secret" --broker-config group.initial.rebalance.delay.ms=0 ${REGENT_ARGS:-} ${REGENT_CLUSTER_ARGS:-} >"$dir/regent$i.log" 2>&1 &
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
run_kafka() { # run_kafka ROUND: the single broker, then the cluster if asked
  run_kafka_single "$1"
  local rc=$?
  if ((kafka_brokers > 1)); then
    run_kafka_cluster "$1" || rc=$?
  fi
  return $rc
}

# start_kafka DIR N: Apache Kafka in KRaft mode, N nodes of broker and
# controller in one JVM each (server.properties from kraft.sh), on free ports
# of 127.0.0.1, node i's files in DIR (one node) or DIR/broker<i>. One node is
# formatted --standalone, a cluster with --initial-controllers naming all N
# voters. Waits for every client port and, on a cluster, until every broker
# has registered (kafka_wait_ready). Sets kafka_bs (the bootstrap list),
# kafka_pids[1..N], broker_pids, server_pid and server_log (node 1) and, on a
# cluster, cluster_pids, so that cleanup stops every JVM it started.
kafka_bs=""
declare -a kafka_pids=()
start_kafka() {
  local dir=$1 n=$2 i nd cluster_id quorum
  local ln=${security^^} # the client listener's name: PLAINTEXT, SSL or SASL_SSL
  local -a ports cports=() ndirs=() format scram=()
  mkdir -p "$dir"
  read -r -a ports <<<"$(free_ports $((2 * n)))"
  for ((i = 1; i <= n; i++)); do cports+=("${ports[2 * i - 1]}"); done
  quorum=$(kraft_quorum "${cports[@]}")
  if ((n == 1)); then
    format=(--standalone)
  else
    format=(--initial-controllers "$(kraft_voters "${cports[@]}")")
  fi
  [[ $security == sasl_ssl ]] && scram=(--add-scram "SCRAM-SHA-512=[name=$sasl_user,password=$sasl_password]")
  kjava "$dir/storage-log4j.log"
  if ! run_step "$dir/uuid.out" "${KJ[@]}" kafka.tools.StorageTool random-uuid; then
    step_failed "kafka-storage random-uuid" "$dir/uuid.out"
    return 1
  fi
  cluster_id=$(tail -n 1 "$dir/uuid.out")
  kafka_bs=""
  for ((i = 1; i <= n; i++)); do
    if ((n == 1)); then nd=$dir; else nd=$dir/broker$i; fi
    ndirs[i]=$nd
    mkdir -p "$nd/data"
    kafka_bs+="${kafka_bs:+,}127.0.0.1:${ports[2 * i - 2]}"
    kraft_server_properties "$i" "$n" "$ln" "$nd/data" "$quorum" "${ports[2 * i - 2]}" "${ports[2 * i - 1]}" \
      >"$nd/server.properties"
    if [[ $security != plaintext ]]; then
      # The same certificate as Regent's; the trust store is for the broker's
      # own inter-broker client (unused on one node, but validated).
      cat >>"$nd/server.properties" <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$tls_dir/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls_dir/ca.pem
EOF
    fi
    if [[ $security == sasl_ssl ]]; then
      cat >>"$nd/server.properties" <<EOF
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$sasl_user" password="$sasl_password";
EOF
    fi
    if ! run_step "$nd/format.out" "${KJ[@]}" kafka.tools.StorageTool format \
        --config "$nd/server.properties" --cluster-id "$cluster_id" "${format[@]}" "${scram[@]}"; then
      step_failed "kafka-storage format (node $i)" "$nd/format.out"
      return 1
    fi
  done
  kafka_pids=()
  for ((i = 1; i <= n; i++)); do
    kjava "${ndirs[i]}/server-log4j.log"
    # shellcheck disable=SC2086 # KAFKA_HEAP is a list of flags
    "${KJ[@]}" $KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
      -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
      kafka.Kafka "${ndirs[i]}/server.properties" >"${ndirs[i]}/server.out" 2>&1 &
    kafka_pids[i]=$!
    ((n > 1)) && cluster_pids+=("$!")
  done
  server_pid=${kafka_pids[1]} server_log=${ndirs[1]}/server.out
  if ((n == 1)); then
    say "[$cur] started Apache Kafka $(kafka_version) pid $server_pid on $kafka_bs ($security)"
  else
    say "[$cur] started a $n-broker Apache Kafka $(kafka_version) KRaft cluster (pids ${kafka_pids[*]}) on $kafka_bs ($security)"
  fi
  local ok=1
  for ((i = 1; i <= n && ok; i++)); do
    wait_port "${ports[2 * i - 2]}" "${kafka_pids[i]}" "${ndirs[i]}/server.out" || ok=0
  done
  if ((ok && n > 1)); then kafka_wait_ready "$dir" "$n" || ok=0; fi
  if ((!ok)); then
    failures=$((failures + 1))
    stop_kafka
    return 1
  fi
  broker_pids=()
  for ((i = 1; i <= n; i++)); do broker_pids[i]=${kafka_pids[i]}; done
}

# kafka_wait_ready DIR N: until a topic of replication factor N can be
# created, i.e. every broker has registered with the controller quorum and is
# unfenced (its port opens before that), bounded by the start timeout. The
# topic, bench-ready (one partition), stays.
kafka_wait_ready() {
  local dir=$1 n=$2 deadline=$(($(now_ms) + start_timeout * 1000)) step_timeout out=$1/ready.out
  kjava "$dir/tools-log4j.log"
  while :; do
    # run_step bounds each try by step_timeout: here, what is left.
    step_timeout=$(((deadline - $(now_ms)) / 1000))
    ((step_timeout > 0)) || break
    if run_step "$out" "${KJ[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$kafka_bs" \
        "${client_conf[@]}" --create --topic bench-ready --partitions 1 --replication-factor "$n" ||
        grep -q 'already exists' "$out"; then
      return 0
    fi
    sleep 1
  done
  echo "bench: [$cur] the $n brokers did not all register in ${start_timeout}s; last lines of $out:" >&2
  tail -n 10 "$out" >&2
  return 1
}

stop_kafka() { # stop every node start_kafka started, all at once
  stop_pids "${kafka_pids[@]}"
  kafka_pids=() cluster_pids=() server_pid=""
}

# run_kafka_single ROUND: every phase against one broker, then the fsync
# phase on the same broker.
run_kafka_single() {
  local dir=$work/round$1/kafka rc
  cur=kafka
  start_kafka "$dir" 1 || return 1
  bench_broker kafka "$kafka_bs" "$dir"
  rc=$?
  # Kafka's durability-equal pairing for Regent's --fsync always: this topic
  # flushes after every append (flush.messages=1, the per-topic form of
  # log.flush.interval.messages=1), on the same broker.
  phase_fsync kafka "$kafka_bs" "$dir" 1 --config flush.messages=1 || rc=1
  stop_kafka
  drop_data "$dir/data"
  return $rc
}

# run_kafka_cluster ROUND: kafka_brokers brokers, every topic replicated to
# all of them (min.insync.replicas 2, the brokers' default); partition
# leaders spread over the brokers, so the clients talk to all of them.
run_kafka_cluster() {
  local dir=$work/round$1/kcluster rc i
  cur=kcluster
  start_kafka "$dir" "$kafka_brokers" || return 1
  bench_broker kcluster "$kafka_bs" "$dir" "$kafka_brokers"
  rc=$?
  # The pairing for the Regent cluster's fsync phase (its raft log is fsynced
  # on a majority before an answer): flush.messages=1, which every replica
  # applies to its own appends; acks=all waits for every in-sync replica.
  phase_fsync kcluster "$kafka_bs" "$dir" "$kafka_brokers" --config flush.messages=1 || rc=1
  stop_kafka
  for ((i = 1; i <= kafka_brokers; i++)); do drop_data "$dir/broker$i/data"; done
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
