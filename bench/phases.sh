# bench/phases.sh: the workload of bench/run.sh, one function per phase.
# Sourced by run.sh; uses its globals (records, record_size, partitions,
# client_conf, broker_pids, step_timeout, ...) and helpers (run_step,
# step_failed, put, kjava, say, now_ms). See bench/README.md for what each
# phase measures.

# Every phase's topics are made before the first phase runs, so no phase pays
# for another's topic creation.
par_partitions=24 # the 4x4 workload's topic: OpenMessaging Benchmark's common shape
par_clients=4     # producers, and consumers in one group, in the 4x4 workload
# A 4x4 consumer stops after this long without a record. It counts from the
# consumer's start too: 8 JVMs starting at once on 2 cores other work loads
# took over 30 s to send their first record.
par_idle_ms=$((idle_timeout * 1000))

# ------------------------------------------------------------- broker costs --
# cost_begin: remember every broker process's write_bytes and CPU ticks.
declare -a cost_before=()
machine_before=""
cost_begin() {
  local pid
  cost_before=()
  for pid in "${broker_pids[@]}"; do cost_before+=("$(proc_sample "$pid")"); done
  machine_before=$(machine_jiffies)
}

# machine_jiffies: the machine's busy and total CPU time so far, in clock
# ticks summed over its cores (/proc/stat: busy is all but idle and iowait).
machine_jiffies() {
  awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat
}

# machine_busy BROKER_TICKS: since cost_begin, the percent of the machine's
# cores that were busy (every process: brokers, load generators, the OS),
# and the brokers' part of that busy time, in percent. Near 100 busy, a
# phase is bound by the CPU, and its throughput by what broker and clients
# spend per GB; the brokers' part is what a broker that cost nothing would
# give back to its clients.
machine_busy() {
  local b0 t0 b1 t1
  read -r b0 t0 <<<"$machine_before"
  read -r b1 t1 <<<"$(machine_jiffies)"
  awk -v b="$((b1 - b0))" -v t="$((t1 - t0))" -v k="$1" 'BEGIN {
    if (t > 0 && b > 0) printf "%.1f %.1f", 100 * b / t, 100 * k / b; else print "" }'
}

# cost_end NAME PHASE MOVED PRODUCED: since cost_begin, each broker process's
# CPU seconds per GB (10^9 B) of MOVED bytes (the phase's produced plus
# consumed bytes), and when PRODUCED > 0 its disk bytes written per produced
# byte; per node (:1, :2, ...) and summed over the nodes (:all).
cost_end() {
  local name=$1 phase=$2 moved=$3 produced=$4 i n=0 wb0 t0 wb1 t1 dwb dt swb=0 st=0
  for i in "${!broker_pids[@]}"; do
    read -r wb0 t0 <<<"${cost_before[n]:-0 0}"
    read -r wb1 t1 <<<"$(proc_sample "${broker_pids[i]}")"
    n=$((n + 1))
    dwb=$((wb1 - wb0)) dt=$((t1 - t0))
    swb=$((swb + dwb)) st=$((st + dt))
    put "$name:cpu:$phase:$i" "$(cpu_per_gb "$dt" "$moved")"
    ((produced > 0)) && put "$name:wpb:$phase:$i" "$(per_byte "$dwb" "$produced")"
  done
  put "$name:cpu:$phase:all" "$(cpu_per_gb "$st" "$moved")"
  ((produced > 0)) && put "$name:wpb:$phase:all" "$(per_byte "$swb" "$produced")"
  local busy share
  read -r busy share <<<"$(machine_busy "$st")"
  if [[ -n $busy ]]; then
    put "$name:busy:$phase" "$busy"
    put "$name:share:$phase" "$share"
  fi
  return 0
}
cpu_per_gb() { awk -v t="$1" -v h="$clk_tck" -v b="$2" 'BEGIN { printf "%.3f", t / h / (b / 1e9) }'; }

# children_ticks PID: the CPU (utime+stime, clock ticks) of every child the
# shell PID has reaped so far, their own children included (cutime+cstime
# of /proc/PID/stat). A step's load generator, reaped by run_step's wait,
# is the difference across the step. PID is the caller's $BASHPID, read
# outside the command substitution (which is a shell of its own).
children_ticks() { sed -E 's/^.*\) //' "/proc/$1/stat" | awk '{ print $14 + $15 }'; }
per_byte() { awk -v w="$1" -v b="$2" 'BEGIN { printf "%.3f", w / b }'; }

# put_rss NAME: each broker process's peak resident set so far (VmHWM), MB.
put_rss() {
  local i
  for i in "${!broker_pids[@]}"; do put "$1:rss:$i" "$(peak_rss_mb "${broker_pids[i]}")"; done
}

# ------------------------------------------------------------------ topics ---
# create_topic NAME BOOTSTRAP DIR TOPIC PARTITIONS RF [--config K=V ...]
create_topic() {
  local name=$1 bs=$2 dir=$3 topic=$4 parts=$5 rf=$6
  shift 6
  kjava "$dir/tools-log4j.log"
  if ! run_step "$dir/create-$topic.out" "${KJ[@]}" org.apache.kafka.tools.TopicCommand \
      --bootstrap-server "$bs" "${client_conf[@]}" --create --topic "$topic" \
      --partitions "$parts" --replication-factor "$rf" "$@"; then
    step_failed "creating topic $topic" "$dir/create-$topic.out"
    return 1
  fi
}

# ---------------------------------------------------------------- produce ----
# parse_produce OUT: "N RPS MBS AVG MAX P50 P95 P99 P999" from
# ProducerPerformance's final line, or nothing.
parse_produce() {
  grep -E '^[0-9]+ records sent, .* 99th' "$1" | tail -n 1 |
    sed -nE 's/^([0-9]+) records sent, ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, ([0-9.]+) ms 50th, ([0-9.]+) ms 95th, ([0-9.]+) ms 99th, ([0-9.]+) ms 99.9th.*/\1 \2 \3 \4 \5 \6 \7 \8 \9/p'
}

# phase_produce NAME BOOTSTRAP DIR KEY TOPIC ACKS N: one unthrottled
# ProducerPerformance run of N records into TOPIC; results under KEY, and the
# brokers' CPU and disk writes over the run.
phase_produce() {
  local name=$1 bs=$2 dir=$3 key=$4 topic=$5 acks=$6 n=$7 t0 lg0 out=$3/produce-$4.out
  local -a f
  say "[$name] $key: producer acks=$acks into $topic: $n x $record_size B"
  cost_begin
  local me=$BASHPID
  t0=$(now_ms) lg0=$(children_ticks "$me")
  kjava "$dir/tools-log4j.log"
  if ! run_step "$out" "${KJ[@]}" -Xmx1g \
      org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$bs" "${client_conf[@]}" \
      --topic "$topic" --num-records "$n" --record-size "$record_size" --throughput -1 \
      --command-property acks="$acks" linger.ms=5 batch.size=65536 client.id="bench-$name-$key"; then
    step_failed "producer $key" "$out"
    return 1
  fi
  read -r -a f <<<"$(parse_produce "$out")"
  if ((${#f[@]} != 9)); then
    step_failed "producer $key (no summary line)" "$out"
    return 1
  fi
  if ((f[0] != n)) || grep -q 'Exception' "$out"; then
    step_failed "producer $key (${f[0]}/$n acknowledged, or errors)" "$out"
    return 1
  fi
  cost_end "$name" "$key" $((n * record_size)) $((n * record_size))
  # The producer JVM's own CPU: it shares the cores with the broker, so it
  # bounds every throughput ratio (README, The numbers).
  put "$name:lg:$key" "$(cpu_per_gb $(($(children_ticks "$me") - lg0)) $((n * record_size)))"
  put "$name:$key:rps" "${f[1]}"; put "$name:$key:mbs" "${f[2]}"; put "$name:$key:avg" "${f[3]}"
  put "$name:$key:max" "${f[4]}"; put "$name:$key:p50" "${f[5]}"; put "$name:$key:p99" "${f[7]}"
  put "$name:$key:p999" "${f[8]}"
  say "[$name]   ${f[1]} records/s, ${f[2]} MB/s, avg ${f[3]} ms, p99 ${f[7]} ms ($(($(now_ms) - t0)) ms wall)"
}

# ---------------------------------------------------------------- consume ----
# parse_consume OUT: ConsumerPerformance's summary line, comma-separated
# without spaces: start.time, end.time, MB, MB.sec, nMsg, nMsg.sec,
# rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec.
parse_consume() {
  awk -F', *' 'NF == 10 && $1 ~ /^[0-9][0-9][0-9][0-9]-/' "$1" | tail -n 1 | tr -d ' '
}

# phase_consume NAME BOOTSTRAP DIR: a warm-up group, then one consumer reads
# all of bench-acks1 in a new group (key c).
phase_consume() {
  local name=$1 bs=$2 dir=$3 t0 out=$3/consume.out
  local -a f
  # The first group on a broker pays one-time costs (Kafka creates its
  # 50-partition __consumer_offsets topic then): taken outside the measure.
  kjava "$dir/tools-log4j.log"
  if ! run_step "$dir/consume-warmup.out" "${KJ[@]}" -Xmx256m \
      org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$bs" "${client_conf[@]}" \
      --topic bench-acks1 --num-records 1 --timeout 30000 --group "bench-$name-warmup"; then
    step_failed "consumer warm-up" "$dir/consume-warmup.out"
    return 1
  fi
  say "[$name] c: consumer: $records records from bench-acks1"
  cost_begin
  local me=$BASHPID lg0
  t0=$(now_ms) lg0=$(children_ticks "$me")
  kjava "$dir/tools-log4j.log"
  if ! run_step "$out" "${KJ[@]}" -Xmx1g \
      org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$bs" "${client_conf[@]}" \
      --topic bench-acks1 --num-records "$records" --timeout 30000 \
      --group "bench-$name" --command-property client.id="bench-$name-consumer"; then
    step_failed "consumer" "$out"
    return 1
  fi
  IFS=',' read -r -a f <<<"$(parse_consume "$out")"
  if ((${#f[@]} != 10)); then
    step_failed "consumer (no summary line)" "$out"
    return 1
  fi
  if [[ ${f[4]} != "$records" ]]; then
    step_failed "consumer (consumed ${f[4]} of $records)" "$out"
    return 1
  fi
  cost_end "$name" c $((records * record_size)) 0
  put "$name:lg:c" "$(cpu_per_gb $(($(children_ticks "$me") - lg0)) $((records * record_size)))"
  put "$name:c:mbs" "${f[3]}"; put "$name:c:nps" "${f[5]}"; put "$name:c:reb" "${f[6]}"
  put "$name:c:fmbs" "${f[8]}"; put "$name:c:fnps" "${f[9]}"
  say "[$name]   ${f[5]} records/s, ${f[3]} MB/s (fetch-only ${f[9]} records/s) ($(($(now_ms) - t0)) ms wall)"
}

# -------------------------------------------------------------- end to end ---
# phase_e2e NAME BOOTSTRAP DIR: Kafka's EndToEndLatency on bench-e2e (one
# partition): one record at a time, sent with acks=all and waited for until a
# consumer has read it back (key e2e).
phase_e2e() {
  local name=$1 bs=$2 dir=$3 t0 out=$3/e2e.out avg pct
  local -a p
  say "[$name] e2e: EndToEndLatency, $latency_records x $record_size B, acks=all"
  t0=$(now_ms)
  kjava "$dir/tools-log4j.log"
  if ! run_step "$out" "${KJ[@]}" -Xmx256m org.apache.kafka.tools.EndToEndLatency \
      --bootstrap-server "$bs" --topic bench-e2e --num-records "$latency_records" \
      --producer-acks all --record-size "$record_size" "${client_conf[@]}"; then
    step_failed "EndToEndLatency" "$out"
    return 1
  fi
  # "Avg latency: 1.2345 ms" and "Percentiles: 50th = 1, 99th = 3, 99.9th = 7"
  # (whole milliseconds, rounded down by the tool).
  avg=$(sed -nE 's/^Avg latency: ([0-9.]+) ms.*/\1/p' "$out" | tail -n 1)
  pct=$(sed -nE 's/^Percentiles: 50th = ([0-9]+), 99th = ([0-9]+), 99\.9th = ([0-9]+).*/\1 \2 \3/p' "$out" | tail -n 1)
  read -r -a p <<<"$pct"
  if [[ -z $avg || ${#p[@]} != 3 ]] || grep -q 'Exception' "$out"; then
    step_failed "EndToEndLatency (no result lines, or errors)" "$out"
    return 1
  fi
  put "$name:e2e:avg" "$avg"; put "$name:e2e:p50" "${p[0]}"; put "$name:e2e:p99" "${p[1]}"
  put "$name:e2e:p999" "${p[2]}"
  say "[$name]   avg $avg ms, p50 ${p[0]} ms, p99 ${p[1]} ms, p99.9 ${p[2]} ms ($(($(now_ms) - t0)) ms wall)"
}

# ---------------------------------------------------------------- parallel ---
# epoch_ms TIME: "2026-12-03T14:15:00.123+0000" (the consumers' --date-format)
# in milliseconds since the epoch.
epoch_ms() { date -d "$1" +%s%3N; }

# phase_parallel NAME BOOTSTRAP DIR: par_clients consumers in one group and
# par_clients producers (acks=all), all at once, on bench-par
# (par_partitions partitions); records in all, split evenly over the
# producers (key par).
#
# Produce MB/s is the sum of the producers' own rates (they run side by
# side). Consume MB/s is every consumed byte over the time from the first
# producer's first send (its end, the mtime of its output, less its count
# over its rate) to the last record any consumer read (its end.time less the
# idle timeout that ended it).
phase_parallel() {
  local name=$1 bs=$2 dir=$3 t0 i rc=0 each=$((records / par_clients)) total
  total=$((each * par_clients))
  local -a pids=() outs=() f
  say "[$name] par: $par_clients producers (acks=all) and $par_clients consumers at once," \
    "$total x $record_size B over $par_partitions partitions"
  cost_begin
  local me=$BASHPID lg0
  t0=$(now_ms) lg0=$(children_ticks "$me")
  # Consumers first, so the group is forming while the producers start, as
  # OpenMessaging Benchmark subscribes before it produces.
  for ((i = 1; i <= par_clients; i++)); do
    kjava "$dir/tools-log4j.log"
    timeout -k 10 "$step_timeout" "${KJ[@]}" -Xmx256m org.apache.kafka.tools.ConsumerPerformance \
      --bootstrap-server "$bs" "${client_conf[@]}" --topic bench-par --num-records "$total" \
      --timeout "$par_idle_ms" --group "bench-$name-par" --date-format "yyyy-MM-dd'T'HH:mm:ss.SSSZ" \
      --command-property client.id="bench-$name-par-c$i" >"$dir/par-consume$i.out" 2>&1 &
    pids+=($!) outs+=("$dir/par-consume$i.out"); bg_pids+=($!)
  done
  for ((i = 1; i <= par_clients; i++)); do
    kjava "$dir/tools-log4j.log"
    timeout -k 10 "$step_timeout" "${KJ[@]}" -Xmx256m org.apache.kafka.tools.ProducerPerformance \
      --bootstrap-server "$bs" "${client_conf[@]}" --topic bench-par --num-records "$each" \
      --record-size "$record_size" --throughput -1 \
      --command-property acks=all linger.ms=5 batch.size=65536 client.id="bench-$name-par-p$i" \
      >"$dir/par-produce$i.out" 2>&1 &
    pids+=($!) outs+=("$dir/par-produce$i.out"); bg_pids+=($!)
  done
  local r bad=""
  for i in "${!pids[@]}"; do
    wait "${pids[i]}"; r=$?
    ((r == 124)) && echo "bench: [$name] a 4x4 client timed out after ${step_timeout}s: see ${outs[i]}" >&2
    ((r)) && [[ -z $bad ]] && rc=$r bad=${outs[i]}
  done
  bg_pids=()
  if ((rc)); then
    step_failed "4x4 workload (a client exited with $rc)" "$bad"
    return 1
  fi
  # Producers: rates add up; the first send is each one's end less its run.
  local rps=0 mbs=0 p99=0 first="" end start
  for ((i = 1; i <= par_clients; i++)); do
    read -r -a f <<<"$(parse_produce "$dir/par-produce$i.out")"
    if ((${#f[@]} != 9)) || ((f[0] != each)) || grep -q 'Exception' "$dir/par-produce$i.out"; then
      step_failed "4x4 producer $i (no summary line, short, or errors)" "$dir/par-produce$i.out"
      return 1
    fi
    end=$(stat -c '%.3Y' "$dir/par-produce$i.out")
    start=$(awk -v e="$end" -v n="${f[0]}" -v r="${f[1]}" 'BEGIN { printf "%.0f", e * 1000 - n / r * 1000 }')
    [[ -z $first ]] || ((start < first)) && first=$start
    rps=$(awk -v a="$rps" -v b="${f[1]}" 'BEGIN { print a + b }')
    mbs=$(awk -v a="$mbs" -v b="${f[2]}" 'BEGIN { print a + b }')
    p99=$(awk -v a="$p99" -v b="${f[7]}" 'BEGIN { print (b > a ? b : a) }')
  done
  # Consumers: counts add up; a consumer that stopped on the idle timeout
  # read its last record that long before its end.time.
  local read_n=0 last=0 en mb
  for ((i = 1; i <= par_clients; i++)); do
    IFS=',' read -r -a f <<<"$(parse_consume "$dir/par-consume$i.out")"
    if ((${#f[@]} != 10)); then
      step_failed "4x4 consumer $i (no summary line)" "$dir/par-consume$i.out"
      return 1
    fi
    ((f[4] == 0)) && continue
    en=$(epoch_ms "${f[1]}") || { step_failed "4x4 consumer $i (end.time ${f[1]})" "$dir/par-consume$i.out"; return 1; }
    ((f[4] < total)) && en=$((en - par_idle_ms))
    ((en > last)) && last=$en
    read_n=$((read_n + f[4]))
  done
  if ((read_n < total)); then
    step_failed "4x4 consumers (read $read_n of $total; each gives up after --idle-timeout $idle_timeout s without a record, counted from its start: raise it on a loaded machine)" "$dir/par-consume1.out"
    return 1
  fi
  if ((last <= first)); then
    step_failed "4x4 consumers (last record before the first send?)" "$dir/par-consume1.out"
    return 1
  fi
  cost_end "$name" par $(((total + read_n) * record_size)) $((total * record_size))
  put "$name:lg:par" "$(cpu_per_gb $(($(children_ticks "$me") - lg0)) $(((total + read_n) * record_size)))"
  mb=$(awk -v n="$read_n" -v s="$record_size" -v ms="$((last - first))" 'BEGIN { printf "%.4f", n * s / 1048576 / (ms / 1000) }')
  put "$name:par:pmbs" "$mbs"; put "$name:par:prps" "$rps"; put "$name:par:p99" "$p99"
  put "$name:par:cmbs" "$mb"
  put "$name:par:dup" "$((read_n - total))"
  say "[$name]   produce $mbs MB/s ($rps records/s, worst p99 $p99 ms), consume $mb MB/s" \
    "($read_n records, $((read_n - total)) read twice; $(($(now_ms) - t0)) ms wall)"
}

# ------------------------------------------------------------------ fsync ----
# phase_fsync NAME BOOTSTRAP DIR RF [--config K=V]: acks=all into a topic
# made for it (key fs). The caller makes the broker fsync every write before
# it answers: Regent with --fsync always, Kafka with flush.messages=1 on this
# topic (its per-topic log.flush.interval.messages).
phase_fsync() {
  local name=$1 bs=$2 dir=$3 rf=$4
  shift 4
  create_topic "$name" "$bs" "$dir" bench-fsync "$partitions" "$rf" "$@" || return 1
  phase_produce "$name" "$bs" "$dir" fs bench-fsync all "$fsync_records"
}

# ---------------------------------------------------------------- workload ---
# bench_broker NAME BOOTSTRAP DIR [RF]: every phase but the fsync one against
# one running broker (or cluster). Each broker starts empty, so both get the
# same sequence of requests. A failed phase is counted and the next one runs.
bench_broker() {
  local name=$1 bs=$2 dir=$3 rf=${4:-1} rc=0 topic
  cur=$name
  for topic in bench-acks1 bench-acksall; do
    create_topic "$name" "$bs" "$dir" "$topic" "$partitions" "$rf" || return 1
  done
  create_topic "$name" "$bs" "$dir" bench-e2e 1 "$rf" || return 1
  create_topic "$name" "$bs" "$dir" bench-par "$par_partitions" "$rf" || return 1

  local filled=1
  phase_produce "$name" "$bs" "$dir" p1 bench-acks1 1 "$records" || { rc=1 filled=0; }
  phase_produce "$name" "$bs" "$dir" pa bench-acksall all "$records" || rc=1
  if ((filled)); then
    phase_consume "$name" "$bs" "$dir" || rc=1
  else
    echo "bench: [$name] skipping the consumer: the acks=1 topic was not filled" >&2
    failures=$((failures + 1)) rc=1
  fi
  phase_e2e "$name" "$bs" "$dir" || rc=1
  phase_parallel "$name" "$bs" "$dir" || rc=1
  # Peak RSS over every phase above.
  put_rss "$name"
  return $rc
}
