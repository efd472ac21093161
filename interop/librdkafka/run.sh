#!/usr/bin/env bash
# Runs librdkafka's own test suite (its tests/ directory) against Regent:
# one node, or a 3-node raft cluster with --nodes 3. Not part of CI: it needs
# a librdkafka source tree, which the project does not carry.
#
#   interop/librdkafka/run.sh --src DIR [--nodes 1|3] [--keep] [-- test-runner args]
#
# DIR is a librdkafka source tree already built (./configure && make libs,
# then make -C tests test-runner). The default test-runner arguments are
# "-L -Q -p1 -E": broker tests only, quick mode, one at a time, no socket
# emulation. TESTS=0081 (an environment variable read by test-runner)
# narrows the run to matching tests.
#
# The broker is set up as librdkafka's own test clusters are (trivup): topics
# auto-created with 4 partitions, ACLs on with everything open that no ACL
# names (the auth tests add DENY ACLs with kafka-acls.sh), Kafka's 3 s
# initial rebalance delay kept (0102_static_group_rebalance counts on two
# members joining in one rebalance), and share groups' timeouts lowered.
# kafka-topics.sh, kafka-acls.sh and kafka-configs.sh, which some tests run, are wrappers
# around the Kafka jars in bench/.cache/kafka-lib (.ci/install-deps puts
# them there). TEST_KAFKA_VERSION defaults to 4.2.0, the Kafka release whose
# behaviour Regent follows for the features the tests switch on by version.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
src="" nodes=1 keep=0
while (($#)); do
  case $1 in
    --src) src=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $src && -x $src/tests/test-runner ]] || { echo "run.sh: --src must name a built librdkafka tree (tests/test-runner missing)" >&2; exit 2; }
[[ $nodes == 1 || $nodes == 3 ]] || { echo "run.sh: --nodes 1 or 3" >&2; exit 2; }
args=("$@")
((${#args[@]})) || args=(-L -Q -p1 -E)
lib=$root/bench/.cache/kafka-lib
compgen -G "$lib/kafka-tools-*.jar" >/dev/null || { echo "run.sh: no Kafka jars in $lib (run .ci/install-deps)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if ((keep)); then echo "run.sh: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# Kafka's command-line tools, as the tests call them: $KAFKA_PATH/bin/NAME.sh.
mkdir -p "$work/kafka/bin"
for tool in kafka-topics:org.apache.kafka.tools.TopicCommand kafka-acls:org.apache.kafka.tools.AclCommand \
            kafka-configs:org.apache.kafka.admin.ConfigCommand; do
  printf '#!/bin/sh\nexec java -Xmx256m -cp "%s/*" %s "$@"\n' "$lib" "${tool#*:}" >"$work/kafka/bin/${tool%%:*}.sh"
  chmod +x "$work/kafka/bin/${tool%%:*}.sh"
done

(cd "$root" && go build -o "$work/regent" ./cmd/regent)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
conf=num.partitions=4,allow.everyone.if.no.acl.found=true
conf+=,group.share.min.session.timeout.ms=1000,group.share.min.heartbeat.interval.ms=100,group.share.min.record.lock.duration.ms=1000
bootstrap="" peers=""
declare -a kp rp ap
for ((i = 1; i <= nodes; i++)); do
  kp[i]=$(free_port) rp[i]=$(free_port) ap[i]=$(free_port)
  bootstrap+="${bootstrap:+,}127.0.0.1:${kp[i]}"
  peers+="${peers:+,}$i=127.0.0.1:${kp[i]}/127.0.0.1:${rp[i]}/127.0.0.1:${ap[i]}"
done
if ((nodes == 1)); then
  "$work/regent" --listen "127.0.0.1:${kp[1]}" --data "$work/data1" --authorizer acl --broker-config "$conf" >"$work/regent1.log" 2>&1 &
  pids+=($!)
else
  "$work/regent" cluster secret >"$work/secret"
  for ((i = 1; i <= nodes; i++)); do
    "$work/regent" --node-id "$i" --listen "127.0.0.1:${kp[i]}" --raft-listen "127.0.0.1:${rp[i]}" \
      --admin-listen "127.0.0.1:${ap[i]}" --peers "$peers" --data "$work/data$i" --cluster-secret-file "$work/secret" \
      --authorizer acl --broker-config "$conf" >"$work/regent$i.log" 2>&1 &
    pids+=($!)
  done
fi
deadline=$((SECONDS + 60))
until if ((nodes == 1)); then (exec 3<>"/dev/tcp/127.0.0.1/${kp[1]}") 2>/dev/null
      else "$work/regent" cluster status --admin "127.0.0.1:${ap[1]}" 2>/dev/null | grep -q '"leader_id":[1-9]'; fi; do
  ((SECONDS < deadline)) || { echo "run.sh: the broker did not come up in 60 s" >&2; tail -20 "$work"/regent*.log >&2; exit 1; }
  sleep 0.2
done

printf 'metadata.broker.list=%s\ntest.timeout.multiplier=3\n' "$bootstrap" >"$work/test.conf"
cd "$src/tests"
export LD_LIBRARY_PATH=../src:../src-cpp KAFKA_PATH=$work/kafka BROKERS=$bootstrap RDKAFKA_TEST_CONF=$work/test.conf
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-4.2.0}
echo "run.sh: librdkafka tests against $nodes Regent node(s) at $bootstrap: ./test-runner ${args[*]}"
rc=0
./test-runner "${args[@]}" || rc=$?
echo "run.sh: test-runner exited $rc; the broker logs are $work/regent*.log$( ((keep)) || echo ' (removed; --keep keeps them)')"
exit $rc
