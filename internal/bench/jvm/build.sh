#!/usr/bin/env bash
# Builds one of eosbench's JVM modes (internal/bench/jvm.go runs it on first
# use): its Maven dependencies (runtime scope) are copied and its sources
# (common/src and APP/src) compiled with javac into a cache directory keyed
# by a hash of this directory's files, so that a change of source or POM
# builds anew and an unchanged tree is built once per machine. Java 17+
# (a JDK: javac) and Maven are installed with apt-get when missing, as
# integration/kafka/broker.sh does for the broker.
#
# Usage: build.sh APP     APP: kstreams | parallelconsumer
# The last stdout line is the classpath to run APP's Main with.
#
# Environment:
#   JVM_BENCH_CACHE_DIR  cache root (default <this dir>/.cache, git-ignored)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${JVM_BENCH_CACHE_DIR:-$SCRIPT_DIR/.cache}
MVN_FLAGS=(-q -B -Dstyle.color=never)

log() { echo "build.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

app=${1:-}
case $app in
  kstreams | parallelconsumer) ;;
  *) die "usage: build.sh kstreams|parallelconsumer" ;;
esac
[ -f "$SCRIPT_DIR/$app/pom.xml" ] || die "no $SCRIPT_DIR/$app/pom.xml"

ensure_tools() {
  local need=()
  command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
  command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null 2>&1 || need+=(maven)
  if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing ${need[*]} and not root; install them (apt-get install ${need[*]})"
    log "installing ${need[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends "${need[@]}" >&2 || die "apt-get install ${need[*]} failed"
  fi
  local jv
  jv=$(javac -version 2>&1 | sed -n 's/^javac \([0-9][0-9]*\).*/\1/p' | head -1)
  if [ -n "$jv" ] && [ "$jv" -lt 17 ]; then
    die "the JVM modes need a Java 17+ JDK, found javac $jv"
  fi
}

# The key of a build: this script, the shared sources and the app's files.
tree_hash() {
  (cd "$SCRIPT_DIR" && find build.sh common "$app" -type f -not -path '*/.cache/*' -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

out="$CACHE_ROOT/$app-$(tree_hash)"
classpath="$out/classes:$out/libs/*"
if [ -f "$out/.complete" ]; then
  echo "$classpath"
  exit 0
fi

ensure_tools
mkdir -p "$CACHE_ROOT"
# One build at a time per cache (two eosbench runs may start together).
exec 9>"$CACHE_ROOT/.lock"
flock -w 600 9 || die "could not lock $CACHE_ROOT/.lock"
if [ -f "$out/.complete" ]; then
  echo "$classpath"
  exit 0
fi
t0=$(date +%s)
rm -rf "$out"
mkdir -p "$out"
log "building $app into $out (Maven dependencies, then javac)"
if ! mvn "${MVN_FLAGS[@]}" -f "$SCRIPT_DIR/$app/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$out/libs" >"$out/mvn.log" 2>&1; then
  tail -n 40 "$out/mvn.log" >&2
  die "mvn could not fetch the dependencies of $SCRIPT_DIR/$app/pom.xml (log: $out/mvn.log)"
fi
mapfile -d '' sources < <(find "$SCRIPT_DIR/common/src" "$SCRIPT_DIR/$app/src" -name '*.java' -print0)
if ! javac --release 17 -encoding UTF-8 -cp "$out/libs/*" -d "$out/classes" "${sources[@]}" >"$out/javac.log" 2>&1; then
  cat "$out/javac.log" >&2
  die "javac failed for $app (log: $out/javac.log)"
fi
touch "$out/.complete"
log "built $app in $(( $(date +%s) - t0 ))s"
echo "$classpath"
