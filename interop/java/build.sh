#!/usr/bin/env bash
# Builds the framework scenarios (interop/java): each module's classes into
# <module>/target/classes and its runtime jars into <module>/target/lib.
#
#   interop/java/build.sh            offline if Maven's cache has everything, else online
#   interop/java/build.sh --online   resolve online (what .ci/install-deps does)
#
# Idempotent: when target/.stamp matches the sources and POMs it does nothing
# and touches no network. Prints nothing unless Maven fails; then the tail of
# Maven's output and exit 1.
set -euo pipefail

dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stamp_file=$dir/target/.stamp
command -v mvn >/dev/null || { echo "interop/java/build.sh: mvn not found" >&2; exit 1; }
command -v java >/dev/null || { echo "interop/java/build.sh: java not found" >&2; exit 1; }

stamp=$(cd "$dir" && find . -path '*/target' -prune -o -type f \( -name '*.java' -o -name 'pom.xml' -o -name '*.properties' \) -print \
  | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [[ ${1:-} != --online && -f $stamp_file && "$(cat "$stamp_file")" == "$stamp" ]] \
    && compgen -G "$dir/kafka/target/lib/kafka-streams-*.jar" >/dev/null \
    && compgen -G "$dir/flink/target/lib/flink-connector-kafka-*.jar" >/dev/null \
    && compgen -G "$dir/legacy/target/lib-*/kafka-clients-*.jar" >/dev/null; then
  exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Stale jars from an older POM would sit next to the new ones on the classpath.
rm -rf "$dir/kafka/target" "$dir/flink/target" "$dir/legacy/target" "$dir/target"

mvn_build() { mvn -q -B -Dstyle.color=never -f "$dir/pom.xml" "$@" compile >"$log" 2>&1; }
if [[ ${1:-} == --online ]]; then
  mvn_build || { echo "interop/java/build.sh: mvn compile failed:" >&2; tail -n 60 "$log" >&2; exit 1; }
elif ! mvn_build -o; then
  # Compile errors are not cured by going online.
  if grep -q 'COMPILATION ERROR' "$log"; then
    echo "interop/java/build.sh: compilation failed:" >&2; tail -n 60 "$log" >&2; exit 1
  fi
  mvn_build || { echo "interop/java/build.sh: mvn compile failed:" >&2; tail -n 60 "$log" >&2; exit 1; }
fi
mkdir -p "$dir/target"
echo "$stamp" >"$stamp_file"
