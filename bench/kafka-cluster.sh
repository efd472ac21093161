#!/usr/bin/env bash
# kafka-cluster.sh: what Apache Kafka's own replication costs on this machine,
# the yardstick for issue 12's "3-node cluster at 0.7x the single node".
#
# Starts BROKERS Apache Kafka brokers (KRaft, broker and controller in each
# JVM, configured by bench/kraft.sh as bench/run.sh --kafka-brokers does),
# creates a topic of 3 partitions at replication factor BROKERS
# (min.insync.replicas 2 on a cluster), warms up with 200000 records, then
# runs ProducerPerformance with the bench's acks=all producer settings and
# prints its result line, each broker's CPU seconds (utime+stime) per GB
# produced and disk bytes written per produced byte.
# Run it with --brokers 1 and then --brokers 3 in one sitting and compare the
# MB/s: both halves share the machine's cores and disk with the load
# generator, as Regent's single node and 3-node cluster do in bench/run.sh.
#
#   bench/kafka-cluster.sh --brokers 3 [--records 1000000] [--record-size 1024]
#
# Everything binds to 127.0.0.1 on free ports; data goes under a temporary
# directory ($TMPDIR) that is removed at the end.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
brokers=3 records=1000000 record_size=1024
while (($#)); do
  case $1 in
    --brokers) brokers=$2; shift 2 ;;
    --records) records=$2; shift 2 ;;
    --record-size) record_size=$2; shift 2 ;;
    *) echo "kafka-cluster: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $brokers =~ ^[1-9]$ ]] || { echo "kafka-cluster: --brokers takes 1 to 9" >&2; exit 2; }

"$bench_dir/fetch-kafka.sh"
lib=${KAFKA_LIB:-$bench_dir/.cache/kafka-lib}
work=$(mktemp -d "${TMPDIR:-/tmp}/kafka-cluster.XXXXXX")
declare -a pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

J=(java -Djava.awt.headless=true -Dlog4j2.configurationFile="$bench_dir/log4j2.properties"
  -Dbench.log.file="$work/tools.log" -cp "$lib/*")

# Two free ports per broker: clients, controller.
read -r -a ports <<<"$(python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(2 * int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$brokers")"
bootstrap="" cports=()
for ((i = 1; i <= brokers; i++)); do
  bootstrap+="${bootstrap:+,}127.0.0.1:${ports[2 * i - 2]}"
  cports+=("${ports[2 * i - 1]}")
done
min_isr=$((brokers >= 2 ? 2 : 1))

# The server.properties and the initial voters (id@host:port:directory-id, a
# random directory id each) come from kraft.sh, as bench/run.sh's do.
# shellcheck source=bench/kraft.sh
source "$bench_dir/kraft.sh"
controllers=$(kraft_quorum "${cports[@]}")
voters=$(kraft_voters "${cports[@]}")
cluster_id=$("${J[@]}" kafka.tools.StorageTool random-uuid | tail -n 1)

for ((i = 1; i <= brokers; i++)); do
  dir=$work/broker$i
  mkdir -p "$dir"
  kraft_server_properties "$i" "$brokers" PLAINTEXT "$dir/data" "$controllers" \
    "${ports[2 * i - 2]}" "${ports[2 * i - 1]}" >"$dir/server.properties"
  if ((brokers == 1)); then format=(--standalone); else format=(--initial-controllers "$voters"); fi
  "${J[@]}" kafka.tools.StorageTool format --config "$dir/server.properties" \
    --cluster-id "$cluster_id" "${format[@]}" >"$dir/format.out" 2>&1 \
    || { cat "$dir/format.out" >&2; exit 1; }
done
for ((i = 1; i <= brokers; i++)); do
  "${J[@]}" -Xms1g -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
    -XX:+ExplicitGCInvokesConcurrent kafka.Kafka "$work/broker$i/server.properties" \
    >"$work/broker$i/server.out" 2>&1 &
  pids[i]=$!
done

# Ready once the topic can be created (every broker registered).
created=0
for ((t = 0; t < 120; t++)); do
  if "${J[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create --topic bench \
      --partitions 3 --replication-factor "$brokers" --config min.insync.replicas=$min_isr >"$work/topic.out" 2>&1; then
    created=1; break
  fi
  sleep 1
done
((created)) || { echo "kafka-cluster: topic not created:" >&2; tail -n 20 "$work/topic.out" >&2; exit 1; }
"${J[@]}" org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create --topic warm \
  --partitions 3 --replication-factor "$brokers" >/dev/null

produce() { # produce TOPIC RECORDS
  "${J[@]}" -Xmx1g org.apache.kafka.tools.ProducerPerformance --bootstrap-server "$bootstrap" --topic "$1" \
    --num-records "$2" --record-size "$record_size" --throughput -1 \
    --command-property acks=all linger.ms=5 batch.size=65536 | tail -n 1
}
cpu_ticks() { sed -E 's/^.*\) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
written() { awk '/^write_bytes/ {print $2}' "/proc/$1/io"; }

produce warm 200000 >/dev/null
declare -a c0 w0
for ((i = 1; i <= brokers; i++)); do c0[i]=$(cpu_ticks "${pids[i]}"); w0[i]=$(written "${pids[i]}"); done
echo "kafka-cluster: $brokers broker(s), $records x $record_size B, acks=all, 3 partitions at RF $brokers"
produce bench "$records"
hz=$(getconf CLK_TCK)
bytes=$((records * record_size))
for ((i = 1; i <= brokers; i++)); do
  awk -v c=$(($(cpu_ticks "${pids[i]}") - c0[i])) -v w=$(($(written "${pids[i]}") - w0[i])) -v hz="$hz" -v b="$bytes" -v i="$i" \
    'BEGIN { printf "broker %d: %.2f CPU s/GB, %.2f disk B/produced B\n", i, c / hz / (b / 1e9), w / b }'
done
