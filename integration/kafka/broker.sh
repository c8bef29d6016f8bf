#!/usr/bin/env bash
# Runs Apache Kafka (KRaft) on 127.0.0.1 for the real-broker test passes:
# one combined broker+controller node by default, or with KAFKA_NODES=3 a
# 3-node cluster of combined nodes (replication factor 3, min.insync.replicas
# 2 for every topic, the internal ones included), the shape production runs.
# The broker is assembled from Maven Central artifacts
# (org.apache.kafka:kafka_2.13 + runtime deps) and run with Java 17+; both
# Java and Maven are installed with apt-get when missing.
#
# Usage: broker.sh start|stop|kill [N]|restart [N]|status|version|secure-env
#   start      fresh data dir (formatted), start, wait until ready; the last
#              stdout line is the bootstrap address (cluster: the
#              comma-separated list of every node's client address). A
#              cluster is ready when every node logged "Kafka Server started"
#              and every node answers Metadata with all KAFKA_NODES brokers.
#   stop       SIGTERM (every node at once), wait up to KAFKA_STOP_TIMEOUT s,
#              then SIGKILL; removes the data dir
#   kill [N]   SIGKILL (hard crash) of node N; keeps its data dir for `restart`
#   restart [N]  start node N again on its SAME data dir (no reformat); if it
#              still runs it is first stopped gracefully (data kept). Prints
#              the bootstrap address (list) as its last stdout line.
#              Single node: N is optional (only 1 is valid). Cluster: N is
#              required — killing "the broker" of a cluster has no single
#              meaning, so `kill`/`restart` without N is an error there.
#   status     prints running/stopped and the version (cluster: one line per
#              node, then a summary); exit 0 iff every node runs
#   version    prints the Kafka version in use
#   secure-env prints, as shell export lines, how to reach the SASL_SSL
#              listener of a cluster started with KAFKA_SASL_SSL=1:
#              KAFKA_SASL_SSL_BROKERS, KAFKA_TLS_CA, KAFKA_SASL_MECHANISM,
#              KAFKA_SASL_USER, KAFKA_SASL_PASSWORD (the variables the
#              tests read; nothing when the listener is off)
#
# Ports: node i (1-based) listens for clients on KAFKA_PORT+2*(i-1) and for
# its controller on the port after that; KAFKA_PORT=19600 with 3 nodes takes
# 19600-19605 (clients 19600, 19602, 19604). A single node keeps KAFKA_PORT
# and KAFKA_PORT+1 (or KAFKA_CONTROLLER_PORT).
#
# Secured listener: with KAFKA_SASL_SSL=1, `start` also gives every node a
# SASL_SSL listener (SCRAM-SHA-512 over TLS) on KAFKA_SASL_SSL_PORT+(i-1)
# (default KAFKA_PORT+100), beside the PLAINTEXT one the rest of the suite
# uses (which stays the inter-broker listener). The certificates are made at
# start, throwaway: a CA and one broker certificate for 127.0.0.1 and
# localhost (openssl, or the JDK's keytool without it), in the state dir's
# tls/ (ca.pem is the CA clients trust). The SCRAM user KAFKA_SASL_USER
# (default onceflow) with KAFKA_SASL_PASSWORD (default: random) is created
# when the storage is formatted (kafka-storage format --add-scram). No
# authorizer: any authenticated user may do anything. `secure-env` prints
# what a client needs.
#
# The node count is remembered in the state dir by `start` (until `stop`), so
# kill/restart/stop/status need no KAFKA_NODES; a KAFKA_NODES that disagrees
# with a running cluster is an error.
#
# Environment:
#   KAFKA_NODES          node count for `start` (default 1: a single node;
#                        3 for the cluster). 2+ nodes get replication factor
#                        min(nodes,3) and min.insync.replicas that minus one.
#   KAFKA_VERSION        kafka_2.13 version (default 4.2.0 for a single node,
#                        4.4.0 for a cluster; see DEFAULT_KAFKA_VERSION below)
#   KAFKA_PORT           first client port (default 9092); see Ports above
#   KAFKA_CONTROLLER_PORT  override the controller port (single node only)
#   KAFKA_STATE_DIR      pid/log/state dir (default <this dir>/.run); a
#                        cluster keeps each node's files in node<i>/ there
#   KAFKA_CACHE_DIR      jar cache (default <this dir>/.cache)
#   KAFKA_START_TIMEOUT  seconds to wait for readiness (default 90)
#   KAFKA_STOP_TIMEOUT   seconds to wait after SIGTERM (default 30)
#   KAFKA_SASL_SSL       1: add the SASL_SSL listener (see above)
#   KAFKA_SASL_SSL_PORT  its first port (default KAFKA_PORT+100)
#   KAFKA_SASL_USER, KAFKA_SASL_PASSWORD  its SCRAM-SHA-512 user
#   KAFKA_HEAP_OPTS      JVM heap/GC flags per node (default -Xms256m -Xmx1g
#                        -XX:+UseG1GC; cluster -Xms256m -Xmx512m -XX:+UseG1GC:
#                        three JVMs share a 2-core machine)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE_DIR=${KAFKA_STATE_DIR:-$SCRIPT_DIR/.run}
NODES_FILE=$STATE_DIR/nodes        # node count of the last start (until stop)

log() { echo "broker.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

now() { date +%s; }

# The node count: KAFKA_NODES if set, else what the last `start` in this state
# dir recorded, else 1.
REMEMBERED_NODES=""
[ -f "$NODES_FILE" ] && REMEMBERED_NODES=$(tr -dc '0-9' <"$NODES_FILE")
NODES=${KAFKA_NODES:-${REMEMBERED_NODES:-1}}
case $NODES in
  [1-9]) ;;
  *) die "KAFKA_NODES must be 1..9, got '$NODES'" ;;
esac

# Single node: 4.2.0, not the newest (4.4.0): on this single-node setup a hard
# kill and restart leaves open transactions unknown to the coordinator from
# 4.3.0 on (duplicates or a stuck last stable offset); 4.1.0 and 4.2.0 recover
# them. See docs/reliability.md, finding 3. A cluster does not take that path
# (a killed node is a leader failover, its replicas rejoin from the others)
# and 4.4.0 passed there (shared notes, kafka-cluster.md), so the cluster runs
# the newest.
if [ "$NODES" = 1 ]; then
  DEFAULT_KAFKA_VERSION=4.2.0
  DEFAULT_HEAP_OPTS="-Xms256m -Xmx1g -XX:+UseG1GC"
else
  DEFAULT_KAFKA_VERSION=4.4.0
  DEFAULT_HEAP_OPTS="-Xms256m -Xmx512m -XX:+UseG1GC"
  [ -z "${KAFKA_CONTROLLER_PORT:-}" ] \
    || die "KAFKA_CONTROLLER_PORT applies to a single node only; a cluster derives every port from KAFKA_PORT"
fi
KAFKA_VERSION=${KAFKA_VERSION:-$DEFAULT_KAFKA_VERSION}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
CACHE_ROOT=${KAFKA_CACHE_DIR:-$SCRIPT_DIR/.cache}
START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
HEAP_OPTS=${KAFKA_HEAP_OPTS:-$DEFAULT_HEAP_OPTS}
DEP_PLUGIN_VERSION=3.8.1
MVN_FLAGS=(-q -B -Dstyle.color=never)

SASL_SSL=${KAFKA_SASL_SSL:-0}
SASL_SSL_PORT=${KAFKA_SASL_SSL_PORT:-$((KAFKA_PORT + 100))}
TLS_DIR=$STATE_DIR/tls
SECURE_FILE=$STATE_DIR/secure.env  # what `secure-env` prints (until stop)

DATA_FILE=$STATE_DIR/data.dir      # holds the path of the current data dir
VERSION_FILE=$STATE_DIR/version    # version of the broker started last
PORT_FILE=$STATE_DIR/port          # KAFKA_PORT of the last start (node 1's client port)

# Per-node files, set by node_paths; a single node keeps the historical
# names directly in the state dir.
NODE=1 NODE_DIR="" NODE_PORT="" NODE_CPORT="" NODE_SPORT=""
PID_FILE="" PROPS_FILE="" LOG4J_FILE="" LOG_FILE="" OUT_FILE=""

# node_paths I: point the per-node globals at node I.
node_paths() {
  NODE=$1
  if [ "$NODES" = 1 ]; then
    NODE_DIR=$STATE_DIR
    NODE_PORT=$KAFKA_PORT
    NODE_CPORT=$KAFKA_CONTROLLER_PORT
  else
    NODE_DIR=$STATE_DIR/node$NODE
    NODE_PORT=$((KAFKA_PORT + 2 * (NODE - 1)))
    NODE_CPORT=$((NODE_PORT + 1))
  fi
  NODE_SPORT=$((SASL_SSL_PORT + NODE - 1))
  PID_FILE=$NODE_DIR/broker.pid
  PROPS_FILE=$NODE_DIR/server.properties
  LOG4J_FILE=$NODE_DIR/log4j2.properties
  LOG_FILE=$NODE_DIR/broker.log    # log4j2 output (INFO)
  OUT_FILE=$NODE_DIR/broker.out    # JVM stdout/stderr
}
node_paths 1

# node_logs_dir DATA: the current node's log.dirs inside the data dir DATA.
node_logs_dir() {
  local data=$1
  if [ "$NODES" = 1 ]; then echo "$data/logs"; else echo "$data/node$NODE/logs"; fi
}

# bootstrap: every node's client address, comma-separated.
bootstrap() {
  local i list=""
  for ((i = 1; i <= NODES; i++)); do
    list+="${list:+,}127.0.0.1:$((KAFKA_PORT + 2 * (i - 1)))"
  done
  echo "$list"
}

# node_arg CMD [N]: the node a kill/restart acts on.
node_arg() {
  local cmd=$1 n=${2:-}
  if [ -z "$n" ]; then
    [ "$NODES" = 1 ] || die "$cmd: this is a $NODES-node cluster; name the node: $cmd 1..$NODES"
    n=1
  fi
  case $n in
    [1-9]) [ "$n" -le "$NODES" ] || die "$cmd: no node $n (nodes 1..$NODES)" ;;
    *) die "$cmd: node must be a number, got '$n'" ;;
  esac
  echo "$n"
}

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

pid_in() { [ -f "$1" ] && tr -dc '0-9' <"$1" || true; }
read_pid() { pid_in "$PID_FILE"; }

# live_kafka PID: PID is a live JVM running kafka.Kafka.
live_kafka() {
  local pid=$1
  [ -n "$pid" ] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ]; then
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'kafka\.Kafka' || return 1
  fi
  return 0
}

# is_running: the current node's pid file names a live JVM running kafka.Kafka.
is_running() { live_kafka "$(read_pid)"; }

# running_nodes: how many of the NODES nodes run.
running_nodes() {
  local i n=0
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    if is_running; then n=$((n + 1)); fi
  done
  echo "$n"
}

# any_running_in_state: some pid file of any layout (single or node<i>/)
# in the state dir names a live broker.
any_running_in_state() {
  local f
  for f in "$STATE_DIR"/broker.pid "$STATE_DIR"/node*/broker.pid; do
    [ -f "$f" ] && live_kafka "$(pid_in "$f")" && return 0
  done
  return 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# metadata_brokers PORT: how many brokers the broker on PORT lists in a
# Metadata response ("" if it does not answer). The broker's runtime jars
# carry no admin CLI (kafka-tools is a separate artifact), so this speaks the
# protocol: a Metadata v4 request (the oldest Kafka 4.x serves, KIP-896) for
# no topics; the response starts size, correlation id, throttle ms, broker
# count (int32 each, big-endian).
metadata_brokers() {
  local port=$1 out
  # shellcheck disable=SC2016
  out=$( {
      exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
      # size 23 | api key 3 | version 4 | correlation id 1 | client id
      # "brokersh" | topics: empty array | allow_auto_topic_creation false
      printf '\x00\x00\x00\x17\x00\x03\x00\x04\x00\x00\x00\x01\x00\x08brokersh\x00\x00\x00\x00\x00' >&3
      timeout 5 head -c 16 <&3 | od -An -tu1
    } 2>/dev/null ) || true
  # shellcheck disable=SC2086
  set -- $out
  [ $# -eq 16 ] || return 0
  echo $(( (${13} << 24) | (${14} << 16) | (${15} << 8) | ${16} ))
}

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

# write_configs DATA: the current node's server.properties and log4j2 config.
write_configs() {
  local data=$1 logs voters i
  logs=$(node_logs_dir "$data")
  mkdir -p "$NODE_DIR"
  # One node: RF 1 / min ISR 1 for everything. More: the production shape,
  # every topic (the internal ones included) with RF min(nodes, 3) and min
  # ISR one less, so one node down is a leader failover, not an outage.
  local rf isr what voters=""
  if [ "$NODES" = 1 ]; then
    rf=1 isr=1 what="single-node KRaft"
    voters="1@127.0.0.1:$NODE_CPORT"
  else
    rf=$((NODES < 3 ? NODES : 3)) isr=$((NODES < 3 ? NODES - 1 : 2)) what="node $NODE of a $NODES-node KRaft cluster"
    for ((i = 1; i <= NODES; i++)); do
      voters+="${voters:+,}$i@127.0.0.1:$((KAFKA_PORT + 2 * (i - 1) + 1))"
    done
  fi
  cat >"$PROPS_FILE" <<PROPS
# generated by integration/kafka/broker.sh — $what for tests
process.roles=broker,controller
node.id=$NODE
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$NODE_PORT,CONTROLLER://127.0.0.1:$NODE_CPORT$([ "$SASL_SSL" = 1 ] && echo ",SASL_SSL://127.0.0.1:$NODE_SPORT")
advertised.listeners=PLAINTEXT://127.0.0.1:$NODE_PORT$([ "$SASL_SSL" = 1 ] && echo ",SASL_SSL://127.0.0.1:$NODE_SPORT")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT$([ "$SASL_SSL" = 1 ] && echo ",SASL_SSL:SASL_SSL")
log.dirs=$logs

num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
share.coordinator.state.topic.num.partitions=1
PROPS
  if [ "$SASL_SSL" = 1 ]; then
    cat >>"$PROPS_FILE" <<PROPS

# the secured listener: SCRAM-SHA-512 over TLS (throwaway certificates)
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS_DIR/broker.p12
ssl.keystore.password=$(cat "$TLS_DIR/storepass")
ssl.key.password=$(cat "$TLS_DIR/storepass")
ssl.client.auth=none
PROPS
  fi
  cat >>"$PROPS_FILE" <<PROPS

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

# small footprint on a 2-core machine (a cluster runs three of these)
num.network.threads=2
num.io.threads=$([ "$NODES" = 1 ] && echo 4 || echo 2)
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
    "-Dlog4j2.configurationFile=$LOG4J_FILE" "-Dkafka.logs.dir=$NODE_DIR")
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

# format_storage CID: format the current node's log dir with cluster id CID.
format_storage() {
  local cid=$1 libs
  libs=$(libs_dir)
  log "formatting KRaft storage of node $NODE (cluster id $cid)"
  local scram=()
  if [ "$SASL_SSL" = 1 ]; then
    scram=(--add-scram "SCRAM-SHA-512=[name=$(secure_get KAFKA_SASL_USER),password=$(secure_get KAFKA_SASL_PASSWORD)]")
  fi
  if ! java -Xmx256m "-Dlog4j2.configurationFile=$LOG4J_FILE" -cp "$libs/*" \
      kafka.tools.StorageTool format -t "$cid" -c "$PROPS_FILE" "${scram[@]}" >>"$OUT_FILE" 2>&1; then
    show_log_tail
    die "kafka.tools.StorageTool format failed for node $NODE"
  fi
}

# format_all CID: format every node, in parallel (each is a JVM start).
format_all() {
  local cid=$1 i pids=() failed=0
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    format_storage "$cid" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || failed=1; done
  [ "$failed" = 0 ] || die "formatting failed (see above)"
}

# ---------------------------------------------------------------- tls ------

# secure_get NAME: a value of the secured listener's settings file.
secure_get() { sed -n "s/^export $1=//p" "$SECURE_FILE" | tr -d "'"; }

# make_secure: the throwaway CA and broker keystore, and the settings file
# clients read (secure-env). openssl takes milliseconds; keytool, the
# fallback, starts a JVM per step (about 10 s on a busy 2-core machine).
make_secure() {
  local pw user pass brokers="" i
  rm -rf "$TLS_DIR"
  mkdir -p "$TLS_DIR"
  pw=$(head -c 18 /dev/urandom | base64 | tr -dc 'a-zA-Z0-9')
  echo "$pw" >"$TLS_DIR/storepass"
  user=${KAFKA_SASL_USER:-onceflow}
  pass=${KAFKA_SASL_PASSWORD:-$(head -c 18 /dev/urandom | base64 | tr -dc 'a-zA-Z0-9')}
  if command -v openssl >/dev/null 2>&1; then
    (
      cd "$TLS_DIR"
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 7 \
        -subj /CN=onceflow-test-ca -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign
      openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout broker.key -out broker.csr -subj /CN=localhost
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' >ext.cnf
      openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.pem -days 7 -extfile ext.cnf
      openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker -out broker.p12 -passout "pass:$pw"
    ) >>"$STATE_DIR/tls.log" 2>&1 || die "making certificates with openssl failed (see $STATE_DIR/tls.log)"
  else
    command -v keytool >/dev/null 2>&1 || die "neither openssl nor keytool found to make certificates"
    (
      cd "$TLS_DIR"
      local kt=(-storetype PKCS12 -storepass "$pw")
      keytool -genkeypair -alias ca -keyalg EC -groupname secp256r1 -dname CN=onceflow-test-ca -ext bc:c -validity 7 -keystore ca.p12 "${kt[@]}"
      keytool -exportcert -alias ca -keystore ca.p12 -rfc -file ca.pem "${kt[@]}"
      keytool -genkeypair -alias broker -keyalg EC -groupname secp256r1 -dname CN=localhost -validity 7 -keystore broker.p12 "${kt[@]}"
      keytool -certreq -alias broker -keystore broker.p12 -file broker.csr "${kt[@]}"
      keytool -gencert -alias ca -keystore ca.p12 -infile broker.csr -outfile broker.pem -rfc \
        -ext SAN=ip:127.0.0.1,dns:localhost -ext KU=digitalSignature -ext EKU=serverAuth -validity 7 "${kt[@]}"
      keytool -importcert -alias ca -keystore broker.p12 -file ca.pem -noprompt "${kt[@]}"
      keytool -importcert -alias broker -keystore broker.p12 -file broker.pem -noprompt "${kt[@]}"
    ) >>"$STATE_DIR/tls.log" 2>&1 || die "making certificates with keytool failed (see $STATE_DIR/tls.log)"
  fi
  for ((i = 1; i <= NODES; i++)); do
    brokers+="${brokers:+,}127.0.0.1:$((SASL_SSL_PORT + i - 1))"
  done
  cat >"$SECURE_FILE" <<ENV
export KAFKA_SASL_SSL_BROKERS='$brokers'
export KAFKA_TLS_CA='$TLS_DIR/ca.pem'
export KAFKA_SASL_MECHANISM='SCRAM-SHA-512'
export KAFKA_SASL_USER='$user'
export KAFKA_SASL_PASSWORD='$pass'
ENV
}

LOGSTART=()             # node -> size of its log when launched
LAUNCHED=()             # nodes launched by this invocation
DEADLINE=0

# spawn_node: start the current node's JVM, detached; does not wait.
spawn_node() {
  local libs
  libs=$(libs_dir)
  java_opts
  if port_open "$NODE_PORT"; then
    die "port $NODE_PORT on 127.0.0.1 (node $NODE) is already in use (set KAFKA_PORT)"
  fi
  if [ "$SASL_SSL" = 1 ] && port_open "$NODE_SPORT"; then
    die "SASL_SSL port $NODE_SPORT on 127.0.0.1 (node $NODE) is already in use (set KAFKA_SASL_SSL_PORT)"
  fi
  if port_open "$NODE_CPORT"; then
    die "controller port $NODE_CPORT on 127.0.0.1 (node $NODE) is already in use (set KAFKA_PORT or KAFKA_CONTROLLER_PORT)"
  fi
  LOGSTART[$NODE]=0
  [ -f "$LOG_FILE" ] && LOGSTART[$NODE]=$(wc -c <"$LOG_FILE")
  echo "=== start $(date -u +%FT%TZ) version $KAFKA_VERSION ===" >>"$OUT_FILE"
  rm -f "$PID_FILE"
  # Detached session: the broker outlives this script (and make's recipe
  # shell). The child writes its own pid, then execs the JVM.
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PID_FILE" \
    java "${JAVA_OPTS[@]}" -cp "$libs/*" kafka.Kafka "$PROPS_FILE" \
    </dev/null >>"$OUT_FILE" 2>&1 9>&- &
  LAUNCHED+=("$NODE")
}

# abort_launch MSG: SIGKILL what this invocation launched, then die.
abort_launch() {
  local i pid
  for i in "${LAUNCHED[@]}"; do
    node_paths "$i"
    pid=$(read_pid)
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PID_FILE"
  done
  die "$1"
}

# wait_ready NODE...: wait until each node logged "Kafka Server started"
# since its launch (the broker logs it once unfenced) and takes connections;
# fail fast if one exits.
wait_ready() {
  local pending=("$@") still i pid
  while :; do
    still=()
    for i in "${pending[@]}"; do
      node_paths "$i"
      pid=$(read_pid)
      if [ -z "$pid" ]; then
        [ "$(now)" -lt "$DEADLINE" ] || abort_launch "node $NODE: broker process did not start"
        still+=("$i")
        continue
      fi
      if ! kill -0 "$pid" 2>/dev/null; then
        show_log_tail
        rm -f "$PID_FILE"
        abort_launch "Kafka $KAFKA_VERSION (node $NODE) exited during startup (logs: $LOG_FILE, $OUT_FILE)"
      fi
      if [ -f "$LOG_FILE" ] && tail -c +"$((LOGSTART[$NODE] + 1))" "$LOG_FILE" | grep -q 'Kafka Server started' \
          && port_open "$NODE_PORT" && { ! grep -q '^listeners=.*SASL_SSL' "$PROPS_FILE" || port_open "$NODE_SPORT"; }; then
        continue
      fi
      still+=("$i")
    done
    [ ${#still[@]} -gt 0 ] || return 0
    if [ "$(now)" -ge "$DEADLINE" ]; then
      for i in "${still[@]}"; do node_paths "$i"; show_log_tail; done
      abort_launch "Kafka $KAFKA_VERSION node(s) ${still[*]} not ready within ${START_TIMEOUT}s (logs under $STATE_DIR)"
    fi
    pending=("${still[@]}")
    sleep 0.2
  done
}

# wait_metadata: every node lists all NODES brokers (each broker's metadata
# cache has caught up with every registration), so the first client request
# to any of them sees the whole cluster.
wait_metadata() {
  local i n
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    while :; do
      n=$(metadata_brokers "$NODE_PORT")
      [ "$n" = "$NODES" ] && break
      if [ "$(now)" -ge "$DEADLINE" ]; then
        show_log_tail
        abort_launch "node $NODE lists ${n:-no} brokers instead of $NODES within ${START_TIMEOUT}s"
      fi
      sleep 0.2
    done
  done
}

# terminate SIGNAL TIMEOUT PID...: send SIGNAL to every PID, wait for all,
# SIGKILL the ones left after TIMEOUT. Every node at once: a cluster whose
# nodes stop one by one loses its quorum and the last ones hang in
# controlled shutdown.
terminate() {
  local sig=$1 timeout=$2 deadline pid alive
  shift 2
  for pid in "$@"; do kill "-$sig" "$pid" 2>/dev/null || true; done
  deadline=$(( $(now) + timeout ))
  while :; do
    alive=()
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ ${#alive[@]} -gt 0 ] || return 0
    if [ "$(now)" -ge "$deadline" ]; then
      log "broker pid(s) ${alive[*]} still alive after ${timeout}s; sending SIGKILL"
      kill -KILL "${alive[@]}" 2>/dev/null || true
      deadline=$(( $(now) + 10 ))
      for pid in "${alive[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [ "$(now)" -lt "$deadline" ]; do sleep 0.1; done
      done
      return 0
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

# load_state: commands other than start act on what the last start made:
# its ports (and its node count, already in NODES).
load_state() {
  if [ -n "${KAFKA_NODES:-}" ] && [ -n "$REMEMBERED_NODES" ] && [ "$KAFKA_NODES" != "$REMEMBERED_NODES" ]; then
    die "$STATE_DIR holds a $REMEMBERED_NODES-node Kafka but KAFKA_NODES=$KAFKA_NODES (unset it, or stop first)"
  fi
  if [ -f "$PORT_FILE" ]; then KAFKA_PORT=$(cat "$PORT_FILE"); fi
  node_paths 1
}

# ---------------------------------------------------------------- commands -

cmd_start() {
  lock_state
  # (a state dir from before node counts were recorded holds a single node)
  if [ "${REMEMBERED_NODES:-1}" = "$NODES" ]; then
    local up
    up=$(running_nodes)
    if [ "$up" = "$NODES" ]; then
      [ -f "$PORT_FILE" ] && KAFKA_PORT=$(cat "$PORT_FILE")
      node_paths 1
      if [ "$NODES" = 1 ]; then
        log "Kafka already running (pid $(read_pid)); reusing it"
      else
        log "Kafka $NODES-node cluster already running; reusing it"
      fi
      bootstrap
      return 0
    fi
    [ "$up" = 0 ] || die "only $up of $NODES nodes run (see status); restart the others (restart N) or stop first"
  fi
  if any_running_in_state; then
    die "a ${REMEMBERED_NODES:-1}-node Kafka runs in $STATE_DIR; stop it first (KAFKA_NODES=$NODES asked)"
  fi
  local i
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    port_open "$NODE_PORT" && die "port $NODE_PORT on 127.0.0.1 is already in use (set KAFKA_PORT)"
  done
  ensure_tools
  ensure_libs
  # a killed broker may have left state behind: start from scratch
  remove_data_dir
  rm -rf "$STATE_DIR"/node[0-9]*
  rm -f "$STATE_DIR/broker.pid" "$STATE_DIR/broker.log" "$STATE_DIR/broker.out"
  local data cid start
  data=$(mktemp -d "${TMPDIR:-/tmp}/onceflow-kafka.XXXXXX")
  echo "$data" >"$DATA_FILE"
  echo "$NODES" >"$NODES_FILE"
  echo "$KAFKA_VERSION" >"$VERSION_FILE"
  echo "$KAFKA_PORT" >"$PORT_FILE"
  rm -f "$SECURE_FILE"
  if [ "$SASL_SSL" = 1 ]; then
    make_secure
    log "SASL_SSL listener on $(secure_get KAFKA_SASL_SSL_BROKERS) (SCRAM-SHA-512 user $(secure_get KAFKA_SASL_USER), CA $TLS_DIR/ca.pem)"
  fi
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    write_configs "$data"
  done
  cid=$(new_cluster_id)
  if [ "$NODES" = 1 ]; then
    node_paths 1
    format_storage "$cid"
  else
    format_all "$cid"
  fi
  start=$(now)
  DEADLINE=$((start + START_TIMEOUT))
  # every node at once: none becomes ready before a quorum of controllers runs
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    spawn_node
  done
  if [ "$NODES" = 1 ]; then
    wait_ready 1
    log "Kafka $KAFKA_VERSION ready in $(( $(now) - start ))s (pid $(read_pid), data $data, log $LOG_FILE)"
  else
    wait_ready "${LAUNCHED[@]}"
    log "all $NODES nodes started in $(( $(now) - start ))s; waiting until each lists $NODES brokers"
    wait_metadata
    log "Kafka $KAFKA_VERSION $NODES-node cluster ready in $(( $(now) - start ))s (data $data, logs $STATE_DIR/node*/broker.log)"
  fi
  bootstrap
}

cmd_restart() {
  local n
  lock_state
  load_state
  n=$(node_arg restart "${1:-}")
  node_paths "$n"
  [ -f "$DATA_FILE" ] && [ -d "$(cat "$DATA_FILE")" ] \
    || die "no existing data dir to restart on (run 'start' first)"
  [ -f "$PROPS_FILE" ] || die "no $PROPS_FILE (run 'start' first)"
  if is_running; then
    log "node $NODE running; stopping it gracefully (data kept)"
    terminate TERM "$STOP_TIMEOUT" "$(read_pid)"
  fi
  rm -f "$PID_FILE"
  # run the same version / ports as the data dir was made with
  if [ -f "$VERSION_FILE" ]; then KAFKA_VERSION=$(cat "$VERSION_FILE"); fi
  if [ "$NODES" = 1 ]; then
    KAFKA_CONTROLLER_PORT=$(sed -n 's/^controller.quorum.voters=1@127.0.0.1:\([0-9]*\).*/\1/p' "$PROPS_FILE")
    node_paths 1
  fi
  ensure_tools
  ensure_libs
  log "restarting node $NODE on existing data dir $(cat "$DATA_FILE")"
  local start
  start=$(now)
  DEADLINE=$((start + START_TIMEOUT))
  spawn_node
  wait_ready "$NODE"
  log "Kafka $KAFKA_VERSION node $NODE ready in $(( $(now) - start ))s (pid $(read_pid), data $(cat "$DATA_FILE"), log $LOG_FILE)"
  bootstrap
}

cmd_stop() {
  local i pids=()
  lock_state
  load_state
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    if is_running; then pids+=("$(read_pid)"); fi
  done
  if [ ${#pids[@]} -gt 0 ]; then
    log "stopping Kafka ($( [ "$NODES" = 1 ] && echo pid || echo "${#pids[@]} of $NODES nodes, pids") ${pids[*]}, SIGTERM, up to ${STOP_TIMEOUT}s)"
    terminate TERM "$STOP_TIMEOUT" "${pids[@]}"
  else
    log "Kafka not running"
  fi
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    rm -f "$PID_FILE"
  done
  remove_data_dir
  rm -f "$NODES_FILE" "$SECURE_FILE"
}

cmd_kill() {
  local n pid deadline
  lock_state
  load_state
  n=$(node_arg kill "${1:-}")
  node_paths "$n"
  if is_running; then
    pid=$(read_pid)
    log "killing Kafka node $NODE (pid $pid, SIGKILL); data dir kept"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$(( $(now) + 10 ))
    while kill -0 "$pid" 2>/dev/null && [ "$(now)" -lt "$deadline" ]; do sleep 0.05; done
  else
    log "Kafka node $NODE not running"
  fi
  rm -f "$PID_FILE"
}

cmd_status() {
  local v=$KAFKA_VERSION i up=0
  load_state
  [ -f "$VERSION_FILE" ] && v=$(cat "$VERSION_FILE")
  if [ "$NODES" = 1 ]; then
    if is_running; then
      echo "running pid=$(read_pid) version=$v bootstrap=$(bootstrap) data=$(cat "$DATA_FILE" 2>/dev/null || echo '?')"
      return 0
    fi
    echo "stopped version=$v"
    return 1
  fi
  for ((i = 1; i <= NODES; i++)); do
    node_paths "$i"
    if is_running; then
      up=$((up + 1))
      echo "node $i running pid=$(read_pid) client=127.0.0.1:$NODE_PORT controller=127.0.0.1:$NODE_CPORT"
    else
      echo "node $i stopped client=127.0.0.1:$NODE_PORT"
    fi
  done
  if [ "$up" = "$NODES" ]; then
    echo "running nodes=$NODES version=$v bootstrap=$(bootstrap) data=$(cat "$DATA_FILE" 2>/dev/null || echo '?')"
    return 0
  fi
  if [ "$up" = 0 ]; then echo "stopped nodes=$NODES version=$v"; else echo "degraded $up/$NODES nodes running version=$v bootstrap=$(bootstrap)"; fi
  return 1
}

cmd_version() {
  load_state
  if [ "$(running_nodes)" != 0 ] && [ -f "$VERSION_FILE" ]; then cat "$VERSION_FILE"; else echo "$KAFKA_VERSION"; fi
}

cmd_secure_env() {
  [ -f "$SECURE_FILE" ] && cat "$SECURE_FILE"
  return 0
}

usage() { echo "usage: $0 start|stop|kill [N]|restart [N]|status|version|secure-env" >&2; exit 2; }

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  start|stop|status|version|secure-env) [ $# -eq 0 ] || usage ;;
  kill|restart) [ $# -le 1 ] || usage ;;
esac
case $cmd in
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) cmd_kill "$@" ;;
  restart) cmd_restart "$@" ;;
  status) cmd_status ;;
  version) cmd_version ;;
  secure-env) cmd_secure_env ;;
  *) usage ;;
esac
