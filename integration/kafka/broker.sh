#!/usr/bin/env bash
# Runs a single-node Apache Kafka (KRaft, combined broker+controller) on
# 127.0.0.1 for the real-broker test pass. The broker is assembled from Maven
# Central artifacts (org.apache.kafka:kafka_2.13 + runtime deps) and run with
# Java 17+; both Java and Maven are installed with apt-get when missing.
#
# Usage: broker.sh start|stop|kill|restart|status|version
#   start    fresh data dir (formatted), start, wait until ready; the last
#            stdout line is the bootstrap address 127.0.0.1:<port>
#   stop     SIGTERM, wait up to KAFKA_STOP_TIMEOUT s, then SIGKILL; removes
#            the data dir
#   kill     SIGKILL (hard crash); keeps the data dir for `restart`
#   restart  start again on the SAME data dir (no reformat); if the broker
#            still runs it is first stopped gracefully (data kept)
#   status   prints running/stopped and the version; exit 0 iff running
#   version  prints the Kafka version in use
#
# Environment:
#   KAFKA_VERSION        kafka_2.13 version (default 4.4.0)
#   KAFKA_PORT           client port (default 9092); controller is port+1
#   KAFKA_CONTROLLER_PORT  override the controller port
#   KAFKA_STATE_DIR      pid/log/state dir (default <this dir>/.run)
#   KAFKA_CACHE_DIR      jar cache (default <this dir>/.cache)
#   KAFKA_START_TIMEOUT  seconds to wait for readiness (default 90)
#   KAFKA_STOP_TIMEOUT   seconds to wait after SIGTERM (default 30)
#   KAFKA_HEAP_OPTS      JVM heap/GC flags (default -Xms256m -Xmx1g -XX:+UseG1GC)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# 4.2.0, not the newest (4.4.0): on this single-node setup a hard kill and
# restart leaves open transactions unknown to the coordinator from 4.3.0 on
# (duplicates or a stuck last stable offset); 4.1.0 and 4.2.0 recover them.
# See docs/reliability.md, finding 3.
DEFAULT_KAFKA_VERSION=4.2.0
KAFKA_VERSION=${KAFKA_VERSION:-$DEFAULT_KAFKA_VERSION}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
STATE_DIR=${KAFKA_STATE_DIR:-$SCRIPT_DIR/.run}
CACHE_ROOT=${KAFKA_CACHE_DIR:-$SCRIPT_DIR/.cache}
START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g -XX:+UseG1GC}
DEP_PLUGIN_VERSION=3.8.1
MVN_FLAGS=(-q -B -Dstyle.color=never)

PID_FILE=$STATE_DIR/broker.pid
DATA_FILE=$STATE_DIR/data.dir      # holds the path of the current data dir
VERSION_FILE=$STATE_DIR/version    # version of the broker started last
PORT_FILE=$STATE_DIR/port
PROPS_FILE=$STATE_DIR/server.properties
LOG4J_FILE=$STATE_DIR/log4j2.properties
LOG_FILE=$STATE_DIR/broker.log     # log4j2 output (INFO)
OUT_FILE=$STATE_DIR/broker.out     # JVM stdout/stderr

log() { echo "broker.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

now() { date +%s; }

# ---------------------------------------------------------------- tools ----

ensure_tools() {
  local need=()
  command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || need+=(maven)
  if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing ${need[*]} and not root; install them (apt-get install ${need[*]})"
    log "installing ${need[*]} with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends "${need[@]}" >&2 \
      || die "apt-get install ${need[*]} failed"
  fi
  command -v java >/dev/null 2>&1 || die "java not found after install"
  local jv
  jv=$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -1)
  if [ -n "$jv" ] && [ "$jv" -lt 17 ]; then
    die "Kafka 4.x needs Java 17+, found Java $jv"
  fi
}

# ---------------------------------------------------------------- jars -----

libs_dir() { echo "$CACHE_ROOT/kafka-$KAFKA_VERSION/libs"; }

ensure_libs() {
  local dir libs
  dir="$CACHE_ROOT/kafka-$KAFKA_VERSION"
  libs="$dir/libs"
  if [ -f "$dir/.complete" ] && compgen -G "$libs/kafka_2.13-*.jar" >/dev/null; then
    log "using cached Kafka $KAFKA_VERSION jars in $libs"
    return 0
  fi
  ensure_tools
  command -v mvn >/dev/null 2>&1 || die "mvn not found"
  log "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and runtime deps with Maven"
  mkdir -p "$dir"
  rm -rf "$libs" "$libs.tmp" "$dir/pom"
  mkdir -p "$dir/pom"
  cat >"$dir/pom/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>onceflow.integration</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
  </dependencies>
  <build>
    <pluginManagement>
      <plugins>
        <plugin>
          <groupId>org.apache.maven.plugins</groupId>
          <artifactId>maven-dependency-plugin</artifactId>
          <version>$DEP_PLUGIN_VERSION</version>
        </plugin>
      </plugins>
    </pluginManagement>
  </build>
</project>
POM
  local t0
  t0=$(now)
  local mvnlog="$dir/mvn.log"
  : >"$mvnlog"
  if ! mvn "${MVN_FLAGS[@]}" -f "$dir/pom/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$libs.tmp" >>"$mvnlog" 2>&1; then
    tail -n 40 "$mvnlog" >&2
    rm -rf "$libs.tmp"
    die "mvn could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION (try another KAFKA_VERSION, e.g. 4.2.1)"
  fi
  compgen -G "$libs.tmp/kafka_2.13-*.jar" >/dev/null || die "kafka_2.13 jar missing after mvn"
  # Kafka 4.x logs through slf4j-api 1.7 into log4j2, but the kafka_2.13 POM
  # does not carry the binding (the release tarball ships it), so without it
  # slf4j falls back to NOP and the broker logs nothing. Add the slf4j-1.7
  # binding matching log4j-core; never an slf4j 2.x jar (logging goes silent).
  if ! compgen -G "$libs.tmp/log4j-slf4j-impl-*.jar" >/dev/null; then
    local core l4jv
    core=$(cd "$libs.tmp" && ls log4j-core-*.jar 2>/dev/null | head -1)
    l4jv=${core#log4j-core-}
    l4jv=${l4jv%.jar}
    [ -n "$l4jv" ] || die "no log4j-core jar among Kafka's runtime deps"
    mvn "${MVN_FLAGS[@]}" -f "$dir/pom/pom.xml" dependency:copy \
        -Dartifact="org.apache.logging.log4j:log4j-slf4j-impl:$l4jv" \
        -DoutputDirectory="$libs.tmp" >>"$mvnlog" 2>&1 \
      || { tail -n 40 "$mvnlog" >&2; die "mvn could not fetch org.apache.logging.log4j:log4j-slf4j-impl:$l4jv"; }
  fi
  if compgen -G "$libs.tmp/slf4j-api-2.*.jar" >/dev/null; then
    log "warning: slf4j-api 2.x on the classpath; broker logging may be silent"
  fi
  mv "$libs.tmp" "$libs"
  touch "$dir/.complete"
  log "fetched $(ls "$libs" | wc -l) jars in $(( $(now) - t0 ))s into $libs"
}

# ---------------------------------------------------------------- state ----

read_pid() { [ -f "$PID_FILE" ] && tr -dc '0-9' <"$PID_FILE" || true; }

# is_running: the pid file names a live JVM running kafka.Kafka.
is_running() {
  local pid
  pid=$(read_pid)
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'kafka\.Kafka' || return 1
  fi
  return 0
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

show_log_tail() {
  local f
  for f in "$LOG_FILE" "$OUT_FILE"; do
    if [ -s "$f" ]; then
      echo "----- last 60 lines of $f -----" >&2
      tail -n 60 "$f" >&2
    fi
  done
  echo "-----" >&2
}

write_configs() {
  local data=$1
  cat >"$PROPS_FILE" <<PROPS
# generated by integration/kafka/broker.sh — single-node KRaft for tests
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data/logs

# single node: every replicated thing has RF 1 / min ISR 1
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=1

# fast groups for tests
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
group.consumer.min.session.timeout.ms=1000
group.consumer.min.heartbeat.interval.ms=500
# a SIGKILLed broker's old registration blocks the restarted one until its
# session expires (default 9 s): keep that short for crash/restart tests
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=500
# abort timed-out transactions promptly (default 10 s)
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000

# small footprint on a 2-core machine
num.network.threads=2
num.io.threads=4
log.cleaner.dedupe.buffer.size=33554432
auto.create.topics.enable=true
PROPS
  cat >"$LOG4J_FILE" <<L4J
status = warn
name = onceflow-kafka
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $LOG_FILE
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.zk.name = org.apache.zookeeper
logger.zk.level = WARN
L4J
}

java_opts() {
  # shellcheck disable=SC2206
  JAVA_OPTS=($HEAP_OPTS -Djava.awt.headless=true -XX:+ExitOnOutOfMemoryError
    "-Dlog4j2.configurationFile=$LOG4J_FILE" "-Dkafka.logs.dir=$STATE_DIR")
}

new_cluster_id() {
  # 16 random bytes, unpadded base64url (what StorageTool random-uuid prints);
  # never starting with '-', which the CLI would read as an option.
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    case $id in -*) ;; *) break ;; esac
  done
  echo "$id"
}

format_storage() {
  local data=$1 libs cid
  libs=$(libs_dir)
  cid=$(new_cluster_id)
  java_opts
  log "formatting KRaft storage in $data (cluster id $cid)"
  if ! java -Xmx256m "-Dlog4j2.configurationFile=$LOG4J_FILE" -cp "$libs/*" \
      kafka.tools.StorageTool format -t "$cid" -c "$PROPS_FILE" >>"$OUT_FILE" 2>&1; then
    show_log_tail
    die "kafka.tools.StorageTool format failed"
  fi
}

launch() {
  local libs start pid deadline
  libs=$(libs_dir)
  java_opts
  if port_open "$KAFKA_PORT"; then
    die "port $KAFKA_PORT on 127.0.0.1 is already in use (set KAFKA_PORT)"
  fi
  if port_open "$KAFKA_CONTROLLER_PORT"; then
    die "controller port $KAFKA_CONTROLLER_PORT on 127.0.0.1 is already in use (set KAFKA_CONTROLLER_PORT)"
  fi
  local logstart=0
  [ -f "$LOG_FILE" ] && logstart=$(wc -c <"$LOG_FILE")
  start=$(now)
  echo "=== start $(date -u +%FT%TZ) version $KAFKA_VERSION ===" >>"$OUT_FILE"
  # Detached session: the broker outlives this script (and make's recipe
  # shell). The child writes its own pid, then execs the JVM.
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
    java "${JAVA_OPTS[@]}" -cp "$libs/*" kafka.Kafka "$PROPS_FILE" \
    </dev/null >>"$OUT_FILE" 2>&1 9>&- &
  echo "$KAFKA_VERSION" >"$VERSION_FILE"
  echo "$KAFKA_PORT" >"$PORT_FILE"
  deadline=$((start + START_TIMEOUT))
  # wait for the pid file
  while [ -z "$(read_pid)" ] && [ "$(now)" -lt "$deadline" ]; do sleep 0.1; done
  pid=$(read_pid)
  [ -n "$pid" ] || die "broker process did not start"
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      show_log_tail
      rm -f "$PID_FILE"
      die "Kafka $KAFKA_VERSION exited during startup (logs: $LOG_FILE, $OUT_FILE)"
    fi
    if [ -f "$LOG_FILE" ] && tail -c +"$((logstart + 1))" "$LOG_FILE" | grep -q 'Kafka Server started' \
        && port_open "$KAFKA_PORT"; then
      break
    fi
    if [ "$(now)" -ge "$deadline" ]; then
      show_log_tail
      kill -KILL "$pid" 2>/dev/null || true
      rm -f "$PID_FILE"
      die "Kafka $KAFKA_VERSION not ready within ${START_TIMEOUT}s (logs: $LOG_FILE, $OUT_FILE)"
    fi
    sleep 0.2
  done
  log "Kafka $KAFKA_VERSION ready in $(( $(now) - start ))s (pid $pid, data $(cat "$DATA_FILE"), log $LOG_FILE)"
  echo "127.0.0.1:$KAFKA_PORT"
}

# terminate PID SIGNAL TIMEOUT: send SIGNAL, wait, SIGKILL after TIMEOUT.
terminate() {
  local pid=$1 sig=$2 timeout=$3 deadline
  kill "-$sig" "$pid" 2>/dev/null || return 0
  deadline=$(( $(now) + timeout ))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(now)" -ge "$deadline" ]; then
      log "broker (pid $pid) still alive after ${timeout}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$(( $(now) + 10 ))
      while kill -0 "$pid" 2>/dev/null && [ "$(now)" -lt "$deadline" ]; do sleep 0.1; done
      break
    fi
    sleep 0.1
  done
}

remove_data_dir() {
  if [ -f "$DATA_FILE" ]; then
    local d
    d=$(cat "$DATA_FILE")
    case $d in
      */onceflow-kafka.*) rm -rf "$d" ;;
      *) [ -n "$d" ] && log "not removing unexpected data dir '$d'" ;;
    esac
    rm -f "$DATA_FILE"
  fi
}

lock_state() {
  mkdir -p "$STATE_DIR"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$STATE_DIR/.lock"
    flock -w 300 9 || die "could not lock $STATE_DIR/.lock"
  fi
}

# ---------------------------------------------------------------- commands -

cmd_start() {
  lock_state
  if is_running; then
    log "Kafka already running (pid $(read_pid)); reusing it"
    echo "127.0.0.1:$(cat "$PORT_FILE" 2>/dev/null || echo "$KAFKA_PORT")"
    return 0
  fi
  port_open "$KAFKA_PORT" && die "port $KAFKA_PORT on 127.0.0.1 is already in use (set KAFKA_PORT)"
  ensure_tools
  ensure_libs
  # a killed broker may have left state behind: start from scratch
  remove_data_dir
  rm -f "$PID_FILE" "$LOG_FILE" "$OUT_FILE"
  local data
  data=$(mktemp -d "${TMPDIR:-/tmp}/onceflow-kafka.XXXXXX")
  echo "$data" >"$DATA_FILE"
  write_configs "$data"
  format_storage "$data"
  launch
}

cmd_restart() {
  lock_state
  [ -f "$DATA_FILE" ] && [ -d "$(cat "$DATA_FILE")" ] \
    || die "no existing data dir to restart on (run 'start' first)"
  [ -f "$PROPS_FILE" ] || die "no $PROPS_FILE (run 'start' first)"
  if is_running; then
    log "broker running; stopping it gracefully (data kept)"
    terminate "$(read_pid)" TERM "$STOP_TIMEOUT"
  fi
  rm -f "$PID_FILE"
  # run the same version / port as the data dir was made with
  if [ -f "$VERSION_FILE" ]; then KAFKA_VERSION=$(cat "$VERSION_FILE"); fi
  if [ -f "$PORT_FILE" ]; then KAFKA_PORT=$(cat "$PORT_FILE"); fi
  KAFKA_CONTROLLER_PORT=$(sed -n 's/^controller.quorum.voters=1@127.0.0.1:\([0-9]*\).*/\1/p' "$PROPS_FILE")
  ensure_tools
  ensure_libs
  log "restarting on existing data dir $(cat "$DATA_FILE")"
  launch
}

cmd_stop() {
  lock_state
  if is_running; then
    local pid
    pid=$(read_pid)
    log "stopping Kafka (pid $pid, SIGTERM, up to ${STOP_TIMEOUT}s)"
    terminate "$pid" TERM "$STOP_TIMEOUT"
  else
    log "Kafka not running"
  fi
  rm -f "$PID_FILE"
  remove_data_dir
}

cmd_kill() {
  lock_state
  if is_running; then
    local pid
    pid=$(read_pid)
    log "killing Kafka (pid $pid, SIGKILL); data dir kept"
    kill -KILL "$pid" 2>/dev/null || true
    local deadline=$(( $(now) + 10 ))
    while kill -0 "$pid" 2>/dev/null && [ "$(now)" -lt "$deadline" ]; do sleep 0.05; done
  else
    log "Kafka not running"
  fi
  rm -f "$PID_FILE"
}

cmd_status() {
  local v=$KAFKA_VERSION
  if is_running; then
    [ -f "$VERSION_FILE" ] && v=$(cat "$VERSION_FILE")
    echo "running pid=$(read_pid) version=$v bootstrap=127.0.0.1:$(cat "$PORT_FILE" 2>/dev/null || echo "$KAFKA_PORT") data=$(cat "$DATA_FILE" 2>/dev/null || echo '?')"
    return 0
  fi
  echo "stopped version=$v"
  return 1
}

cmd_version() {
  if is_running && [ -f "$VERSION_FILE" ]; then cat "$VERSION_FILE"; else echo "$KAFKA_VERSION"; fi
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) cmd_kill ;;
  restart) cmd_restart ;;
  status) cmd_status ;;
  version) cmd_version ;;
  *) echo "usage: $0 start|stop|kill|restart|status|version" >&2; exit 2 ;;
esac
