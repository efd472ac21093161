#!/usr/bin/env bash
# bench/run.sh: Regent against Apache Kafka's own broker, one run, same machine,
# same load generators (Kafka's ProducerPerformance / ConsumerPerformance).
#
#   bench/run.sh [--records N] [--record-size B] [--partitions P] [--rounds R]
#                [--only regent|kafka] [--regent-nodes N] [--security MODE]
#                [--step-timeout S] [--keep]
#
# See bench/README.md for what is measured and the caveats.
set -uo pipefail # no -e: a failure against one broker must not abort the other

usage() {
  cat <<'EOF'
usage: bench/run.sh [options]
  --records N        records per producer run and for the consumer (default 2000000)
  --record-size B    record value size in bytes (default 100)
  --partitions P     partitions of each benchmark topic (default 3)
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

records=2000000
record_size=100
partitions=3
rounds=1
only=both
regent_nodes=1
security=plaintext
step_timeout=600
keep=0
start_timeout=90 # seconds for a broker to open its port

need_arg() { [[ $# -ge 2 && -n $2 ]] || { echo "bench: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --records) need_arg "$@"; records=$2; shift 2 ;;
    --record-size) need_arg "$@"; record_size=$2; shift 2 ;;
    --partitions) need_arg "$@"; partitions=$2; shift 2 ;;
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
for v in records record_size partitions rounds step_timeout regent_nodes; do
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
child_pid=""   # the client step currently running (a `timeout` process)

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

# Two distinct free TCP ports on 127.0.0.1.
free_ports() {
  local py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1; then
      "$py" -c '
import socket
ss = []
for _ in range(2):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); ss.append(s)
print(" ".join(str(s.getsockname()[1]) for s in ss))' && return 0
    fi
  done
  # Fallback: random high ports that nobody is listening on.
  local a b
  while :; do
    a=$((20000 + RANDOM % 30000)); b=$((a + 1))
    (exec 3<>"/dev/tcp/127.0.0.1/$a") 2>/dev/null && continue
    (exec 3<>"/dev/tcp/127.0.0.1/$b") 2>/dev/null && continue
    echo "$a $b"; return 0
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

# put_proc_costs NAME BEFORE...: after a produce run of records x record_size,
# record for each broker process (before = proc_sample outputs, one per
# broker_pids entry, same order) the disk bytes written per produced byte and
# the CPU seconds per produced GB, per node and summed over the nodes, and each
# node's peak RSS.
put_proc_costs() {
  local name=$1 i n=0 wb0 t0 wb1 t1 dwb dt swb=0 st=0 produced
  shift
  local -a before=("$@")
  produced=$((records * record_size))
  for i in "${!broker_pids[@]}"; do
    read -r wb0 t0 <<<"${before[n]}"
    read -r wb1 t1 <<<"$(proc_sample "${broker_pids[i]}")"
    n=$((n + 1))
    dwb=$((wb1 - wb0)) dt=$((t1 - t0))
    swb=$((swb + dwb)) st=$((st + dt))
    put "$name:io:wpb:$i" "$(awk -v w="$dwb" -v p="$produced" 'BEGIN { printf "%.3f", w / p }')"
    put "$name:io:cpu:$i" "$(awk -v t="$dt" -v h="$clk_tck" -v p="$produced" 'BEGIN { printf "%.2f", t / h / (p / 1e9) }')"
    put "$name:io:rss:$i" "$(peak_rss_mb "${broker_pids[i]}")"
  done
  put "$name:io:wpb:all" "$(awk -v w="$swb" -v p="$produced" 'BEGIN { printf "%.3f", w / p }')"
  put "$name:io:cpu:all" "$(awk -v t="$st" -v h="$clk_tck" -v p="$produced" 'BEGIN { printf "%.2f", t / h / (p / 1e9) }')"
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

# ------------------------------------------------------------ the workload ---
# bench_broker NAME BOOTSTRAP DIR: topics, two producer runs, one consumer run.
# Each broker starts empty, so both get exactly the same sequence of requests.
bench_broker() {
  local name=$1 bs=$2 dir=$3 rf=${4:-1} t0 line f
  cur=$name
  local tools_log=$dir/tools-log4j.log

  for topic in bench-acks1 bench-acksall; do
    kjava "$tools_log"
    if ! run_step "$dir/create-$topic.out" "${KJ[@]}" org.apache.kafka.tools.TopicCommand \
        --bootstrap-server "$bs" "${client_conf[@]}" --create --topic "$topic" \
        --partitions "$partitions" --replication-factor "$rf"; then
      step_failed "creating topic $topic" "$dir/create-$topic.out"
      return 1
    fi
  done

  local acks key filled=0
  for acks in 1 all; do
    key=p1; [[ $acks == all ]] && key=pa
    say "[$name] producer acks=$acks: $records x ${record_size} B"
    # The brokers' writes and CPU are measured over the acks=all run.
    local -a before=()
    local pid
    if [[ $acks == all ]]; then
      for pid in "${broker_pids[@]}"; do before+=("$(proc_sample "$pid")"); done
    fi
    t0=$(now_ms)
    kjava "$tools_log"
    if ! run_step "$dir/produce-acks$acks.out" "${KJ[@]}" -Xmx1g \
        org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$bs" "${client_conf[@]}" \
        --topic "bench-acks$acks" --num-records "$records" --record-size "$record_size" \
        --throughput -1 \
        --command-property acks="$acks" linger.ms=5 batch.size=65536 client.id="bench-$name-acks$acks"; then
      step_failed "producer acks=$acks" "$dir/produce-acks$acks.out"
      continue
    fi
    # Final summary: N records sent, R records/sec (M MB/sec), A ms avg latency,
    # X ms max latency, a ms 50th, b ms 95th, c ms 99th, d ms 99.9th.
    line=$(grep -E '^[0-9]+ records sent, .* 99th' "$dir/produce-acks$acks.out" | tail -n 1)
    read -r -a f <<<"$(sed -nE 's/^([0-9]+) records sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, ([0-9.]+) ms 50th, ([0-9.]+) ms 95th, ([0-9.]+) ms 99th, ([0-9.]+) ms 99.9th.*/\1 \2 \3 \4 \5 \6 \7 \8 \9/p' <<<"$line")"
    if ((${#f[@]} != 9)); then
      step_failed "producer acks=$acks (no summary line)" "$dir/produce-acks$acks.out"
      continue
    fi
    if ((f[0] != records)) || grep -q 'Exception' "$dir/produce-acks$acks.out"; then
      step_failed "producer acks=$acks (${f[0]}/$records acknowledged, or errors)" "$dir/produce-acks$acks.out"
      continue
    fi
    put "$name:$key:rps" "${f[1]}"; put "$name:$key:mbs" "${f[2]}"; put "$name:$key:avg" "${f[3]}"
    put "$name:$key:max" "${f[4]}"; put "$name:$key:p50" "${f[5]}"; put "$name:$key:p99" "${f[7]}"
    put "$name:$key:p999" "${f[8]}"
    [[ $acks == 1 ]] && filled=1
    [[ $acks == all ]] && put_proc_costs "$name" "${before[@]}"
    say "[$name]   ${f[1]} records/s, ${f[2]} MB/s, avg ${f[3]} ms, p99 ${f[7]} ms ($(($(now_ms) - t0)) ms wall)"
  done

  if ((!filled)); then
    echo "bench: [$name] skipping the consumer: the acks=1 topic was not filled" >&2
    failures=$((failures + 1))
    return 1
  fi
  # Warm-up: the first group on a broker pays one-time costs (Kafka creates its
  # 50-partition __consumer_offsets topic then). Take them outside the measure.
  kjava "$tools_log"
  if ! run_step "$dir/consume-warmup.out" "${KJ[@]}" -Xmx256m \
      org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$bs" "${client_conf[@]}" \
      --topic bench-acks1 --num-records 1 --timeout 30000 --group "bench-$name-warmup"; then
    step_failed "consumer warm-up" "$dir/consume-warmup.out"
    return 1
  fi
  say "[$name] consumer: $records records from bench-acks1"
  t0=$(now_ms)
  kjava "$tools_log"
  if ! run_step "$dir/consume.out" "${KJ[@]}" -Xmx1g \
      org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$bs" "${client_conf[@]}" \
      --topic bench-acks1 --num-records "$records" --timeout 30000 \
      --group "bench-$name" --command-property client.id="bench-$name-consumer"; then
    step_failed "consumer" "$dir/consume.out"
    return 1
  fi
  # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
  # nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
  line=$(awk -F', *' 'NF == 10 && $1 ~ /^[0-9][0-9][0-9][0-9]-/' "$dir/consume.out" | tail -n 1)
  IFS=',' read -r -a f <<<"${line// /}"
  if ((${#f[@]} != 10)); then
    step_failed "consumer (no summary line)" "$dir/consume.out"
    return 1
  fi
  if [[ ${f[4]} != "$records" ]]; then
    step_failed "consumer (consumed ${f[4]} of $records)" "$dir/consume.out"
    return 1
  fi
  put "$name:c:mbs" "${f[3]}"; put "$name:c:nps" "${f[5]}"; put "$name:c:reb" "${f[6]}"
  put "$name:c:fmbs" "${f[8]}"; put "$name:c:fnps" "${f[9]}"
  say "[$name]   ${f[5]} records/s, ${f[3]} MB/s (fetch-only ${f[9]} records/s) ($(($(now_ms) - t0)) ms wall)"
  return 0
}

# ----------------------------------------------------------------- regent ----
regent_bin=${REGENT_BIN:-$cache/regent}
build_regent() {
  cur=regent
  if [[ -n ${REGENT_BIN:-} ]]; then
    [[ -x $REGENT_BIN ]] || { echo "bench: REGENT_BIN=$REGENT_BIN is not executable" >&2; failures=$((failures + 1)); return 1; }
    say "[regent] using REGENT_BIN=$REGENT_BIN (not building)"
    return 0
  fi
  command -v "$GO" >/dev/null || { echo "bench: go not found (set GO)" >&2; failures=$((failures + 1)); return 1; }
  say "[regent] building ./cmd/regent"
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

run_regent_single() { # run_regent_single ROUND
  local dir=$work/round$1/regent port
  mkdir -p "$dir/data"
  cur=regent
  read -r port _ <<<"$(free_ports)"
  server_log=$dir/regent.log
  local -a listen=(--listen "127.0.0.1:$port")
  case $security in
    ssl) listen=(--listeners "SSL://127.0.0.1:$port" --tls-cert "$tls_dir/server.pem" --tls-key "$tls_dir/server-key.pem") ;;
    sasl_ssl)
      listen=(--listeners "SASL_SSL://127.0.0.1:$port" --tls-cert "$tls_dir/server.pem"
        --tls-key "$tls_dir/server-key.pem" --sasl-mechanisms SCRAM-SHA-512)
      # The user goes into the stopped broker's store, as Kafka's goes into
      # its metadata log at format time.
      if ! run_step "$dir/users-add.out" "$regent_bin" users add "$sasl_user" --mechanism SCRAM-SHA-512 \
          --password-file "$tls_dir/password" --data "$dir/data"; then
        step_failed "regent users add" "$dir/users-add.out"
        return 1
      fi
      ;;
  esac
  # The same group.initial.rebalance.delay.ms=0 as the Kafka half's
  # server.properties, so group joins compare like with like.
  # shellcheck disable=SC2086 # REGENT_ARGS is a list of flags
  "$regent_bin" "${listen[@]}" --data "$dir/data" \
    --broker-config group.initial.rebalance.delay.ms=0 ${REGENT_ARGS:-} >"$server_log" 2>&1 &
  server_pid=$!
  say "[regent] started pid $server_pid on 127.0.0.1:$port ($security)"
  if ! wait_port "$port" "$server_pid" "$server_log"; then
    failures=$((failures + 1))
    stop_pid "$server_pid"; server_pid=""
    return 1
  fi
  broker_pids=([1]="$server_pid")
  bench_broker regent "127.0.0.1:$port" "$dir"
  local rc=$?
  stop_pid "$server_pid"; server_pid=""
  return $rc
}

# run_regent_cluster ROUND: regent_nodes nodes in raft cluster mode, every
# topic replicated to all of them; the load goes to whichever leads.
run_regent_cluster() {
  local dir=$work/round$1/cluster i peers="" bs="" kp rp ap
  local -a kports rports aports pids
  cur=cluster
  mkdir -p "$dir"
  for ((i = 1; i <= regent_nodes; i++)); do
    read -r kp rp <<<"$(free_ports)"
    read -r ap _ <<<"$(free_ports)"
    kports[i]=$kp rports[i]=$rp aports[i]=$ap
    peers+="${peers:+,}$i=127.0.0.1:$kp/127.0.0.1:$rp/127.0.0.1:$ap"
    bs+="${bs:+,}127.0.0.1:$kp"
  done
  for ((i = 1; i <= regent_nodes; i++)); do
    mkdir -p "$dir/data$i"
    # shellcheck disable=SC2086 # REGENT_ARGS is a list of flags
    "$regent_bin" --node-id "$i" --listen "127.0.0.1:${kports[i]}" --raft-listen "127.0.0.1:${rports[i]}" \
      --admin-listen "127.0.0.1:${aports[i]}" --peers "$peers" --data "$dir/data$i" \
      --broker-config group.initial.rebalance.delay.ms=0 ${REGENT_ARGS:-} >"$dir/regent$i.log" 2>&1 &
    pids[i]=$!
  done
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
    # Which node led (and so took the clients' traffic) this round.
    leader=$("$regent_bin" cluster status --admin "127.0.0.1:${aports[1]}" 2>/dev/null | sed -nE 's/.*"leader_id":([0-9]+).*/\1/p' | head -n 1)
    put cluster:leader "${leader:-?}"
  else
    failures=$((failures + 1))
  fi
  for ((i = 1; i <= regent_nodes; i++)); do stop_pid "${pids[i]}"; done
  server_pid=""
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
  stop_pid "$server_pid"; server_pid=""
  return $rc
}

kafka_version() {
  local j
  j=$(compgen -G "$kafka_lib/kafka_2.13-*.jar" | head -n 1)
  j=${j##*/kafka_2.13-}; echo "${j%.jar}"
}

# ------------------------------------------------------------------ report ---
median() { # median "V1 V2 ...": empty when there are no values
  [[ -n ${1:-} ]] || return 0
  tr ' ' '\n' <<<"$1" | sort -g | awk '{ v[NR] = $1 }
    END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ratio() { # ratio "REGENT VALUES" "KAFKA VALUES": ratio of the medians
  local a b
  a=$(median "${1:-}") b=$(median "${2:-}")
  awk -v a="$a" -v b="$b" 'BEGIN {
    if (a == "" || b == "" || b + 0 == 0) { print "n/a"; exit }
    printf "%.3f\n", a / b }'
}

fmt() { # median to one decimal, or "-" when there is no value
  local m
  m=$(median "${1:-}")
  if [[ -z $m ]]; then echo -; else awk -v x="$m" 'BEGIN { printf "%.1f\n", x }'; fi
}

fmt2() { # median to three significant decimals, or "-"
  local m
  m=$(median "${1:-}")
  if [[ -z $m ]]; then echo -; else awk -v x="$m" 'BEGIN { printf "%.3f\n", x }'; fi
}

report() {
  local rows=(
    "p1:rps|produce acks=1   records/s|higher"
    "p1:mbs|produce acks=1   MB/s|higher"
    "p1:avg|produce acks=1   avg latency ms|lower"
    "p1:p50|produce acks=1   p50 latency ms|lower"
    "p1:p99|produce acks=1   p99 latency ms|lower"
    "p1:p999|produce acks=1   p99.9 latency ms|lower"
    "p1:max|produce acks=1   max latency ms|lower"
    "pa:rps|produce acks=all records/s|higher"
    "pa:mbs|produce acks=all MB/s|higher"
    "pa:avg|produce acks=all avg latency ms|lower"
    "pa:p99|produce acks=all p99 latency ms|lower"
    "c:nps|consume         records/s|higher"
    "c:mbs|consume         MB/s|higher"
    "c:fnps|consume fetch-only records/s|higher"
    "c:reb|consume group join ms|lower"
  )
  # Broker costs over the acks=all run, per node (a single node is node 1)
  # and summed over the cluster's nodes.
  local i n=$regent_nodes
  for ((i = 1; i <= n; i++)); do rows+=("io:wpb:$i|disk B written/produced B, node $i|lower"); done
  ((n > 1)) && rows+=("io:wpb:all|disk B written/produced B, all nodes|lower")
  for ((i = 1; i <= n; i++)); do rows+=("io:cpu:$i|CPU s per produced GB, node $i|lower"); done
  ((n > 1)) && rows+=("io:cpu:all|CPU s per produced GB, all nodes|lower")
  for ((i = 1; i <= n; i++)); do rows+=("io:rss:$i|peak RSS MB, node $i|lower"); done
  local r key label better v
  echo
  echo "bench: $records records x $record_size B, $partitions partitions, $(nproc) cores," \
    "Apache Kafka $(kafka_version), $rounds round(s)$( ((rounds > 1)) && echo ', medians')"
  security_line
  if ((n > 1)); then
    echo "regent ran as one node and then as a $n-node raft cluster on this machine (every write replicated to all $n; leader per round: ${res[cluster:leader]:-?}); kafka as one node"
  fi
  echo "disk, CPU and RSS rows: each broker process over the acks=all producer run (/proc/PID/io write_bytes, utime+stime), per $records x $record_size B produced; RSS is VmHWM by then"
  local -a head=(metric regent kafka regent/kafka better)
  local line='%-44s %14s %14s %13s  %s\n'
  if ((n > 1)); then
    head=(metric regent "regent x$n" kafka regent/kafka "x$n/regent" better)
    line='%-44s %14s %14s %14s %13s %11s  %s\n'
  fi
  # shellcheck disable=SC2059 # the format is one of the two above
  printf "$line" "${head[@]}"
  for r in "${rows[@]}"; do
    IFS='|' read -r key label better <<<"$r"
    local f=fmt
    [[ $key == io:wpb:* ]] && f=fmt2
    local reg kaf clu
    reg=$($f "${res[regent:$key]:-}") kaf=$($f "${res[kafka:$key]:-}")
    if ((n > 1)); then
      clu=$($f "${res[cluster:$key]:-}")
      # shellcheck disable=SC2059
      printf "$line" "$label" "$reg" "$clu" "$kaf" "$(ratio "${res[regent:$key]:-}" "${res[kafka:$key]:-}")" \
        "$(ratio "${res[cluster:$key]:-}" "${res[regent:$key]:-}")" "$better"
    else
      # shellcheck disable=SC2059
      printf "$line" "$label" "$reg" "$kaf" "$(ratio "${res[regent:$key]:-}" "${res[kafka:$key]:-}")" "$better"
    fi
  done
  {
    printf '# %s\n' "$(security_line)"
    if ((n > 1)); then
      printf 'metric\tregent (per round)\tkafka (per round)\tregent x%s cluster (per round)\n' "$n"
    else
      printf 'metric\tregent (per round)\tkafka (per round)\n'
    fi
    for r in "${rows[@]}"; do
      IFS='|' read -r key label better <<<"$r"
      v="$key\t${res[regent:$key]:-}\t${res[kafka:$key]:-}"
      ((n > 1)) && v+="\t${res[cluster:$key]:-}"
      printf '%b\n' "$v"
    done
  } >"$cache/last-results.tsv" 2>/dev/null
  echo
  if ((n > 1)); then
    echo "bench: cluster/single acks=all throughput ratio $(ratio "${res[cluster:pa:rps]:-}" "${res[regent:pa:rps]:-}")" \
      "($n-node regent over 1-node regent, same run)"
  fi
  echo "bench: producer throughput ratio $(ratio "${res[regent:p1:rps]:-}" "${res[kafka:p1:rps]:-}")," \
    "consumer throughput ratio $(ratio "${res[regent:c:nps]:-}" "${res[kafka:c:nps]:-}")," \
    "producer p99 latency ratio $(ratio "${res[regent:p1:p99]:-}" "${res[kafka:p1:p99]:-}")"
}

# -------------------------------------------------------------------- main ---
command -v "$JAVA" >/dev/null || { echo "bench: java not found (set JAVA)" >&2; exit 1; }
command -v timeout >/dev/null || { echo "bench: coreutils timeout not found" >&2; exit 1; }
mkdir -p "$cache"
# The perf tools are Kafka's, so the jars are needed for both halves.
"$bench_dir/fetch-kafka.sh" || { echo "bench: could not resolve the Kafka jars" >&2; exit 1; }
say "work dir $work; $records records x $record_size B, $partitions partitions, security $security"
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
