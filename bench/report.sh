# bench/report.sh: the table of bench/run.sh: medians per broker, ratios, the
# issue's goals, the raw values (bench/.cache/last-results.tsv) and a block
# for bench/RESULTS.md (bench/.cache/last-results.md). Sourced by run.sh; reads
# its res[] array and settings.

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

fmtv() { # fmtv DECIMALS "VALUES": the median, or "-" when there is none
  local m
  m=$(median "${2:-}")
  if [[ -z $m ]]; then echo -; else awk -v x="$m" -v d="$1" 'BEGIN { printf "%." d "f\n", x }'; fi
}

# verdict RATIO GOAL: "met", "missed", or "n/a" without a ratio; "" without a goal.
verdict() {
  [[ -n $2 ]] || return 0
  awk -v r="$1" -v g="$2" 'BEGIN {
    if (r == "n/a") { print "n/a"; exit }
    split(g, p, " "); v = p[2] + 0
    ok = (p[1] == ">=") ? (r + 0 >= v) : (r + 0 <= v)
    print (ok ? "met" : "missed") }'
}

# report_rows: "key|label|better|decimals|goal" for every row of the table.
# Goals are the issue's, on Regent/Kafka (medians): ">= X" or "<= X".
report_rows() {
  local n=$regent_nodes i sum=""
  ((n > 1)) && sum=", sum over nodes"
  cat <<EOF
p1:rps|produce acks=1 records/s|higher|1|>= 2.0
p1:mbs|produce acks=1 MB/s|higher|1|
p1:avg|produce acks=1 avg latency ms|lower|1|
p1:p50|produce acks=1 p50 latency ms|lower|1|
p1:p99|produce acks=1 p99 latency ms|lower|1|
p1:p999|produce acks=1 p99.9 latency ms|lower|1|
p1:max|produce acks=1 max latency ms|lower|1|
cpu:p1:all|produce acks=1 broker CPU s/GB$sum|lower|2|
wpb:p1:all|produce acks=1 disk B/produced B$sum|lower|3|
lg:p1|produce acks=1 load generator CPU s/GB|lower|2|
busy:p1|produce acks=1 machine CPU busy %|lower|1|
share:p1|produce acks=1 brokers' part of the busy CPU %|lower|1|
pa:rps|produce acks=all records/s|higher|1|>= 1.5
pa:mbs|produce acks=all MB/s|higher|1|
pa:avg|produce acks=all avg latency ms|lower|1|
pa:p50|produce acks=all p50 latency ms|lower|1|
pa:p99|produce acks=all p99 latency ms|lower|1|<= 0.5
pa:p999|produce acks=all p99.9 latency ms|lower|1|
cpu:pa:all|produce acks=all broker CPU s/GB$sum|lower|2|<= 0.25
wpb:pa:all|produce acks=all disk B/produced B$sum|lower|3|
lg:pa|produce acks=all load generator CPU s/GB|lower|2|
busy:pa|produce acks=all machine CPU busy %|lower|1|
share:pa|produce acks=all brokers' part of the busy CPU %|lower|1|
EOF
  if ((n > 1)); then
    for ((i = 1; i <= n; i++)); do echo "cpu:pa:$i|produce acks=all broker CPU s/GB, node $i|lower|2|"; done
    for ((i = 1; i <= n; i++)); do echo "wpb:pa:$i|produce acks=all disk B/produced B, node $i|lower|3|"; done
  fi
  cat <<EOF
c:nps|consume records/s (with join)|higher|1|>= 1.1
c:mbs|consume MB/s (with join)|higher|1|
c:fnps|consume fetch-only records/s|higher|1|
c:reb|consume group join ms|lower|0|
cpu:c:all|consume broker CPU s/GB$sum|lower|2|<= 0.35
lg:c|consume load generator CPU s/GB|lower|2|
busy:c|consume machine CPU busy %|lower|1|
share:c|consume brokers' part of the busy CPU %|lower|1|
e2e:avg|EndToEndLatency avg ms|lower|3|
e2e:p50|EndToEndLatency p50 ms (whole ms)|lower|0|
e2e:p99|EndToEndLatency p99 ms (whole ms)|lower|0|<= 0.5
e2e:p999|EndToEndLatency p99.9 ms (whole ms)|lower|0|
par:pmbs|4x4 produce MB/s (sum of 4)|higher|1|>= 1.5
par:prps|4x4 produce records/s (sum of 4)|higher|1|
par:p99|4x4 produce p99 ms (worst of 4)|lower|1|
par:cmbs|4x4 consume MB/s (first send to last read)|higher|1|>= 1.5
par:dup|4x4 records read twice|lower|0|
cpu:par:all|4x4 broker CPU s/GB moved$sum|lower|2|
wpb:par:all|4x4 disk B/produced B$sum|lower|3|
lg:par|4x4 load generators CPU s/GB moved (8 JVMs)|lower|2|
busy:par|4x4 machine CPU busy %|lower|1|
share:par|4x4 brokers' part of the busy CPU %|lower|1|
fs:rps|fsync every write: acks=all records/s|higher|1|>= 3.0
fs:mbs|fsync every write: acks=all MB/s|higher|1|
fs:p99|fsync every write: p99 latency ms|lower|1|
cpu:fs:all|fsync every write: broker CPU s/GB$sum|lower|2|
wpb:fs:all|fsync every write: disk B/produced B$sum|lower|3|
lg:fs|fsync every write: load generator CPU s/GB|lower|2|
busy:fs|fsync every write: machine CPU busy %|lower|1|
share:fs|fsync every write: brokers' part of the busy CPU %|lower|1|
EOF
  for ((i = 1; i <= n; i++)); do echo "rss:$i|peak RSS MB, node $i|lower|0|$( ((i == 1)) && echo '<= 0.1')"; done
}

# build_info: what was measured, for RESULTS.md: run.sh keeps it in
# build_commit when it builds (other work may commit while the run goes on).
build_commit=""
build_info() {
  local head dirty
  if [[ -n ${REGENT_BIN:-} ]]; then
    echo "REGENT_BIN=$REGENT_BIN (not built by the run)"
    return
  fi
  head=$(git -C "$repo_dir" rev-parse --short=12 HEAD 2>/dev/null) || { echo "unknown (not a git checkout)"; return; }
  dirty=$(git -C "$repo_dir" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
  if ((dirty)); then echo "$head + uncommitted changes in $dirty file(s)"; else echo "$head (clean tree)"; fi
}

machine_info() {
  local cpu mem fs
  cpu=$(sed -nE 's/^model name\s*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
  mem=$(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo 2>/dev/null)
  fs=$(df -PT "$work" 2>/dev/null | awk 'NR == 2 { print $2 " on " $1 }')
  echo "$(nproc) cores (${cpu:-?}), ${mem:-?} GiB RAM, Linux $(uname -r), work dir on ${fs:-?}"
}

# cluster_goal KEY GOAL: "RATIO (goal GOAL: VERDICT)" for regent xN over
# kafka xN on the row KEY.
cluster_goal() {
  local r
  r=$(ratio "${res[cluster:$1]:-}" "${res[kcluster:$1]:-}")
  echo "$r (goal $2: $(verdict "$r" "$2"))"
}

report() {
  local n=$regent_nodes kn=$kafka_brokers r key label better dec goal reg kaf clu kclu rat crat krat v met=0 goals=0 missed="" unmeasured=""
  local -a rows
  mapfile -t rows < <(report_rows)
  # The metric column fits the longest label.
  local lw=48
  for r in "${rows[@]}"; do
    IFS='|' read -r _ label _ <<<"$r"
    ((${#label} > lw)) && lw=${#label}
  done
  local line="%-${lw}s"' %12s %12s %12s %8s %7s  %s\n' mdh='| metric | regent | kafka | regent/kafka | goal | verdict |' mds='| --- | ---: | ---: | ---: | ---: | --- |'
  local -a head=(metric regent kafka regent/kafka goal verdict better)
  if ((kn > 1)); then
    # kn > 1 only with kn == n (run.sh): both clusters, node for node.
    line="%-${lw}s"' %12s %12s %12s %12s %12s %10s %12s %8s %7s  %s\n'
    head=(metric regent "regent x$n" kafka "kafka x$n" regent/kafka "x$n/regent" "x$n/kafka x$n" goal verdict better)
    mdh="| metric | regent | regent x$n | kafka | kafka x$n | regent/kafka | x$n/regent | x$n/kafka x$n | goal | verdict |"
    mds='| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |'
  elif ((n > 1)); then
    line="%-${lw}s"' %12s %12s %12s %12s %10s %8s %7s  %s\n'
    head=(metric regent "regent x$n" kafka regent/kafka "x$n/regent" goal verdict better)
    mdh="| metric | regent | regent x$n | kafka | regent/kafka | x$n/regent | goal | verdict |"
    mds='| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |'
  fi
  local summary
  summary="$records records x $record_size B ($partitions partitions; EndToEndLatency $latency_records;"
  summary+=" 4x4 $((records / par_clients * par_clients)) over $par_partitions partitions; fsync $fsync_records),"
  summary+=" Apache Kafka $(kafka_version), $rounds round(s)$( ((rounds > 1)) && echo ', medians')"
  local -a notes=("$(security_line)")
  if ((kn > 1)); then
    notes+=("regent ran as one node and then as a $n-node raft cluster on this machine (every write replicated to all $n, committed on a majority; leader per round: ${res[cluster:leader]:-?})")
    notes+=("kafka ran as one broker and then as a $kn-broker KRaft cluster on this machine (broker and controller in each JVM; every topic, internal ones too, at replication factor $kn, min.insync.replicas 2; acks=all waits for every in-sync replica; partition leaders spread over the brokers)")
    notes+=("x$n/kafka x$n: the regent cluster's median over the kafka cluster's; the goal and verdict columns are for regent/kafka (the single nodes)")
  elif ((n > 1)); then
    notes+=("regent ran as one node and then as a $n-node raft cluster on this machine (every write replicated to all $n; leader per round: ${res[cluster:leader]:-?}); kafka as one node")
  fi
  notes+=("CPU and disk rows: each broker process over that phase (utime+stime, /proc/PID/io write_bytes); RSS: VmHWM after the last phase before the fsync one")
  notes+=("fsync every write: regent --fsync always (a second process), kafka flush.messages=1 on its topic$( ((kn > 1)) && echo "; the clusters: regent's raft log as always (fsynced on a majority before an answer), kafka flush.messages=1 on every replica")")
  local reported_end
  reported_end=$(cat "$reported_kib_file" 2>/dev/null)
  if [[ $reported_kib_start =~ ^[0-9]+$ && $reported_end =~ ^[0-9]+$ ]]; then
    notes+=("free page reporting: the kernel gave $(awk -v k=$((reported_end - reported_kib_start)) 'BEGIN { printf "%.1f", k / 1048576 }') GiB of freed memory back to the hypervisor during the run; a page used again after that costs a first-touch fault, charged to the process that writes it (a broker filling its page cache), so CPU and throughput rows vary with it (bench/README.md)")
  fi
  local md=""
  echo
  echo "bench: $summary"
  printf '%s\n' "${notes[@]}"
  # shellcheck disable=SC2059 # the format is one of the two above
  printf "$line" "${head[@]}"
  for r in "${rows[@]}"; do
    IFS='|' read -r key label better dec goal <<<"$r"
    reg=$(fmtv "$dec" "${res[regent:$key]:-}") kaf=$(fmtv "$dec" "${res[kafka:$key]:-}")
    rat=$(ratio "${res[regent:$key]:-}" "${res[kafka:$key]:-}")
    v=$(verdict "$rat" "$goal")
    if [[ -n $goal ]]; then
      goals=$((goals + 1))
      case $v in
        met) met=$((met + 1)) ;;
        missed) missed+="${missed:+; }$label ($rat, goal $goal)" ;;
        *) unmeasured+="${unmeasured:+; }$label" ;;
      esac
    fi
    if ((kn > 1)); then
      clu=$(fmtv "$dec" "${res[cluster:$key]:-}") kclu=$(fmtv "$dec" "${res[kcluster:$key]:-}")
      crat=$(ratio "${res[cluster:$key]:-}" "${res[regent:$key]:-}")
      krat=$(ratio "${res[cluster:$key]:-}" "${res[kcluster:$key]:-}")
      # shellcheck disable=SC2059
      printf "$line" "$label" "$reg" "$clu" "$kaf" "$kclu" "$rat" "$crat" "$krat" "${goal:--}" "${v:--}" "$better"
      md+="| $label | $reg | $clu | $kaf | $kclu | $rat | $crat | $krat | ${goal:-} | ${v:-} |"$'\n'
    elif ((n > 1)); then
      clu=$(fmtv "$dec" "${res[cluster:$key]:-}")
      crat=$(ratio "${res[cluster:$key]:-}" "${res[regent:$key]:-}")
      # shellcheck disable=SC2059
      printf "$line" "$label" "$reg" "$clu" "$kaf" "$rat" "$crat" "${goal:--}" "${v:--}" "$better"
      md+="| $label | $reg | $clu | $kaf | $rat | $crat | ${goal:-} | ${v:-} |"$'\n'
    else
      # shellcheck disable=SC2059
      printf "$line" "$label" "$reg" "$kaf" "$rat" "${goal:--}" "${v:--}" "$better"
      md+="| $label | $reg | $kaf | $rat | ${goal:-} | ${v:-} |"$'\n'
    fi
  done
  {
    printf '# %s\n' "$(security_line)"
    if ((kn > 1)); then
      printf 'metric\tregent (per round)\tkafka (per round)\tregent x%s cluster (per round)\tkafka x%s cluster (per round)\n' "$n" "$kn"
    elif ((n > 1)); then
      printf 'metric\tregent (per round)\tkafka (per round)\tregent x%s cluster (per round)\n' "$n"
    else
      printf 'metric\tregent (per round)\tkafka (per round)\n'
    fi
    for r in "${rows[@]}"; do
      IFS='|' read -r key _ <<<"$r"
      v="$key\t${res[regent:$key]:-}\t${res[kafka:$key]:-}"
      ((n > 1)) && v+="\t${res[cluster:$key]:-}"
      ((kn > 1)) && v+="\t${res[kcluster:$key]:-}"
      printf '%b\n' "$v"
    done
  } >"$cache/last-results.tsv" 2>/dev/null
  local goal_line="bench: goals met $met of $goals${missed:+; missed: $missed}${unmeasured:+; no ratio (a figure missing, or Kafka at 0): $unmeasured}"
  local cluster_line=""
  ((n > 1)) && cluster_line="bench: cluster/single acks=all throughput ratio $(ratio "${res[cluster:pa:rps]:-}" "${res[regent:pa:rps]:-}") ($n-node regent over 1-node regent, same run)"
  local kcluster_line="" clusters_line=""
  if ((kn > 1)); then
    kcluster_line="bench: kafka cluster/single acks=all throughput ratio $(ratio "${res[kcluster:pa:rps]:-}" "${res[kafka:pa:rps]:-}") ($kn-broker kafka over 1-broker kafka, same run)"
    clusters_line="bench: regent x$n / kafka x$kn: acks=all throughput ratio $(cluster_goal pa:rps '>= 1.5'), acks=all p99 latency ratio $(cluster_goal pa:p99 '<= 0.5')"
  fi
  local last_line
  last_line="bench: producer throughput ratio $(ratio "${res[regent:p1:rps]:-}" "${res[kafka:p1:rps]:-}"),"
  last_line+=" consumer throughput ratio $(ratio "${res[regent:c:nps]:-}" "${res[kafka:c:nps]:-}"),"
  last_line+=" producer p99 latency ratio $(ratio "${res[regent:p1:p99]:-}" "${res[kafka:p1:p99]:-}")"
  {
    echo "## $(date -u '+%Y-%m-%d %H:%M') UTC"
    echo
    echo "- command: \`bench/run.sh${run_args:+ $run_args}\`"
    echo "- commit: ${build_commit:-$(build_info)}"
    echo "- machine: $(machine_info)"
    echo "- load average at start / end: $load_start / $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- workload: $summary"
    for v in "${notes[@]}"; do echo "- $v"; done
    ((failures)) && echo "- **$failures step(s) failed**"
    echo
    echo "$mdh"
    echo "$mds"
    printf '%s' "$md"
    echo
    echo "\`$goal_line\`"
    [[ -n $cluster_line ]] && echo "\`$cluster_line\`"
    [[ -n $kcluster_line ]] && echo "\`$kcluster_line\`"
    [[ -n $clusters_line ]] && echo "\`$clusters_line\`"
    echo "\`$last_line\`"
  } >"$cache/last-results.md" 2>/dev/null
  echo
  echo "$goal_line"
  [[ -n $cluster_line ]] && echo "$cluster_line"
  [[ -n $kcluster_line ]] && echo "$kcluster_line"
  [[ -n $clusters_line ]] && echo "$clusters_line"
  echo "$last_line"
}
