#!/usr/bin/env bash
# Resolve Apache Kafka's broker and perf tools (see bench/pom.xml) into a plain
# classpath directory, bench/.cache/kafka-lib by default (or $KAFKA_LIB).
#
# Idempotent: when the directory was built from the current pom.xml it does
# nothing and touches no network. Prints nothing unless Maven fails.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib=${KAFKA_LIB:-$bench_dir/.cache/kafka-lib}
pom=$bench_dir/pom.xml

command -v mvn >/dev/null || { echo "fetch-kafka: mvn not found" >&2; exit 1; }
stamp=$(sha256sum "$pom" | cut -d' ' -f1)
if [[ -f $lib/.stamp && "$(cat "$lib/.stamp")" == "$stamp" ]] \
    && compgen -G "$lib/kafka_2.13-*.jar" >/dev/null; then
  exit 0
fi

mkdir -p "$(dirname "$lib")"
tmp=$(mktemp -d "$lib.tmp.XXXXXX")
mvn_log=$tmp.log
trap 'rm -rf "$tmp" "$mvn_log"' EXIT

if ! mvn -q -B -Dstyle.color=never -f "$pom" \
      dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$tmp" >"$mvn_log" 2>&1; then
  echo "fetch-kafka: mvn dependency:copy-dependencies failed:" >&2
  tail -n 60 "$mvn_log" >&2
  exit 1
fi
compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null \
  || { echo "fetch-kafka: no kafka_2.13 jar was resolved" >&2; exit 1; }
echo "$stamp" >"$tmp/.stamp"
rm -rf "$lib"
mv "$tmp" "$lib"
