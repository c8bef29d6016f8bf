#!/usr/bin/env bash
# finding3.sh — settle docs/reliability.md finding 3 with Kafka's own Java
# client: on a single-node KRaft broker (combined broker+controller, RF 1),
# does a broker SIGKILL + restart during a transactional
# consume-transform-produce run lose transaction state (duplicates in the
# read_committed output, or a last stable offset that never advances)?
#
# No franz-go and no onceflow code is involved: the copy is done by
# org.apache.kafka.tools.TransactionalMessageCopier (the program of Kafka's
# own system test tests/kafkatest/tests/core/transactions_test.py), one copier
# per input partition, all in one consumer group, --use-group-metadata; or,
# with F3_COPIER=spread, by F3SpreadCopier.java beside this script (the same
# loop with the Java client, each transaction over all output partitions).
# Results and their reading: docs/reliability.md, section "Finding 3 with Kafka's own Java client".
#
# One run:
#   1. fetch org.apache.kafka:kafka-tools:$F3_TOOLS_VERSION with its runtime
#      deps into $KAFKA_CACHE_DIR/tools-<version>/libs (Maven, once);
#   2. start a fresh single-node broker with broker.sh (same config as the
#      Go integration tests);
#   3. create input (F3_PARTITIONS) and output (same count) topics; seed
#      F3_RECORDS unique integers with VerifiableProducer (acks=all,
#      idempotent; keys 0..999 so the records spread over the partitions);
#   4. start the copiers (TransactionalMessageCopier writes record r of input
#      partition p to output partition p; F3SpreadCopier re-keys each record
#      by its value, so it lands on any output partition); a supervisor restarts a copier that exits non-zero
#      (Kafka's hard-bounce test does not need that, the Java client rides out
#      a broker restart; it is here so that a dying copier cannot end the run);
#   5. SIGKILL the broker (broker.sh kill) F3_KILLS times, when the copiers
#      report 20/45/70 % of F3_RECORDS copied (spread evenly for other
#      counts; read from their status lines), each time F3_DOWN_SECS down,
#      then broker.sh restart on the same data dir;
#   6. wait (bounded) for the copiers to finish, then up to F3_LSO_WAIT s for
#      every output partition's last stable offset to reach its high
#      watermark (an open transaction the coordinator still knows is aborted
#      after the transaction timeout; a transaction it lost stays open);
#   7. read input and output back (ConsoleConsumer, read_committed) and count
#      duplicates and missing values; record HW/LSO per partition,
#      kafka-transactions list/describe/describe-producers/find-hanging;
#   8. dump __transaction_state and __consumer_offsets (DumpLogSegments
#      --transaction-log-decoder / --offsets-decoder) and the output
#      partitions' batch headers; keep the broker and client logs;
#   9. stop the broker (also on error / Ctrl-C, via trap).
#
# Usage: integration/kafka/finding3.sh [RUN_LABEL]
#   The last stdout line is the summary (also appended to
#   $F3_RESULTS/summary.tsv):
#   version tools run aborts=0|1 killcopiers=0|1 groupmode=0|1 copier=tool|spread tv=LEVEL
#   inputs outputs unique dups missing stuck_partitions
#   kills copier_restarts verdict
#   Exit status: 0 exactly once, 1 duplicates/missing/stuck LSO, 2 harness error.
#
# Environment (defaults in brackets):
#   KAFKA_VERSION        broker version [4.4.0]
#   F3_TOOLS_VERSION     kafka-tools (client) version [$KAFKA_VERSION]
#   KAFKA_PORT           broker client port [19700] (controller: port+1)
#   F3_STATE_DIR         state dir (broker pid/log/data, client logs)
#                        [/tmp/wt-java-f3]
#   F3_RESULTS           results root [$F3_STATE_DIR/results]; one run goes to
#                        <root>/<version>-<label>
#   KAFKA_CACHE_DIR      jar cache shared with broker.sh [/work/kafka-cache]
#   F3_RECORDS           input records [200000]
#   F3_PARTITIONS        input = output partitions = copiers [4]
#   F3_TXN_SIZE          records per transaction (--transaction-size) [750]
#   F3_TXN_TIMEOUT_MS    --transaction-timeout [30000]
#   F3_KILLS             broker SIGKILL + restart cycles [3]
#   F3_DOWN_SECS         seconds the broker stays down per kill [2]
#   F3_COPY_TIMEOUT      seconds for the whole copy phase [900]
#   F3_LSO_WAIT          seconds to wait for LSO == HW after the copy
#                        [txn timeout + 40]
#   F3_RANDOM_ABORTS     1: copiers run with --enable-random-aborts (abort
#                        about a third of the transactions, then rewind to
#                        the committed offsets, as franz-go's loop does after
#                        an error) [0]
#   F3_TXN_VERSION       if set, set the cluster feature transaction.version
#                        to this level before the run (FeatureCommand; e.g. 1
#                        = no KIP-890 part 2) [unset: the fresh cluster's 2]
#   F3_KILL_COPIERS      1: right after each broker SIGKILL also SIGKILL every
#                        copier (the supervisor restarts it; its
#                        initTransactions then makes the restarted coordinator
#                        fence and abort the transaction it recovered, the
#                        path franz-go takes when it reloads its producer ID
#                        after an unconfirmed transaction) [0]
#   F3_GROUP_MODE        1: copiers run with --group-mode (subscribe to the
#                        input topic in one group instead of one assigned
#                        partition each), so a transaction spans several
#                        output partitions, as in franz-go's
#                        GroupTransactSession loop [0]
#   F3_COPIER            tool: org.apache.kafka.tools.TransactionalMessageCopier
#                        (writes input partition p to output partition p, so
#                        each transaction has one output partition);
#                        spread: F3SpreadCopier.java beside this script, the
#                        same loop with the Java client but records keyed to
#                        every output partition, so each transaction spans
#                        all of them (like onceflow / franz-go); copier c
#                        gets the input partitions p with p % F3_COPIERS == c
#                        [tool]
#   F3_COPIERS           copiers in group mode or spread mode [2]
#                        (otherwise one per partition)
#   F3_DUMP_OUTPUT       dump output batch headers: always|problems [always]
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKER_SH=$SCRIPT_DIR/broker.sh

export KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}
TOOLS_VERSION=${F3_TOOLS_VERSION:-$KAFKA_VERSION}
export KAFKA_PORT=${KAFKA_PORT:-19700}
STATE=${F3_STATE_DIR:-/tmp/wt-java-f3}
RESULTS_ROOT=${F3_RESULTS:-$STATE/results}
export KAFKA_CACHE_DIR=${KAFKA_CACHE_DIR:-/work/kafka-cache}
RECORDS=${F3_RECORDS:-200000}
PARTS=${F3_PARTITIONS:-4}
GROUP_MODE=${F3_GROUP_MODE:-0}
COPIER=${F3_COPIER:-tool}
if [ "$GROUP_MODE" = 1 ] || [ "$COPIER" = spread ]; then COPIERS=${F3_COPIERS:-2}; else COPIERS=$PARTS; fi
TXN_SIZE=${F3_TXN_SIZE:-750}
TXN_TIMEOUT_MS=${F3_TXN_TIMEOUT_MS:-30000}
KILLS=${F3_KILLS:-3}
DOWN_SECS=${F3_DOWN_SECS:-2}
COPY_TIMEOUT=${F3_COPY_TIMEOUT:-900}
LSO_WAIT=${F3_LSO_WAIT:-$((TXN_TIMEOUT_MS / 1000 + 40))}
DUMP_OUTPUT=${F3_DUMP_OUTPUT:-always}
RANDOM_ABORTS=${F3_RANDOM_ABORTS:-0}
TXN_VERSION=${F3_TXN_VERSION:-}
KILL_COPIERS=${F3_KILL_COPIERS:-0}
LABEL=${1:-run$(date -u +%H%M%S)}

BOOT=127.0.0.1:$KAFKA_PORT
IN=f3-in
OUT=f3-out
GROUP=f3-copiers
RUN=$RESULTS_ROOT/$KAFKA_VERSION-$LABEL
export KAFKA_STATE_DIR=$STATE/broker
# broker.sh puts its data dir under $TMPDIR: keep it inside our state dir
export TMPDIR=$STATE/tmp

mkdir -p "$STATE" "$TMPDIR" "$RESULTS_ROOT"
[ -e "$RUN" ] && { echo "finding3.sh: $RUN exists; pick another label" >&2; exit 2; }
mkdir -p "$RUN"

ts() { date -u +%H:%M:%S.%3N; }
log() { echo "$(ts) finding3[$KAFKA_VERSION/$LABEL]: $*" | tee -a "$RUN/events.log" >&2; }
die() { log "ERROR: $*"; exit 2; }
now() { date +%s; }

# ---------------------------------------------------------------- jars -----

tools_libs() { echo "$KAFKA_CACHE_DIR/tools-$1/libs"; }

# ensure_tools_libs VERSION: org.apache.kafka:kafka-tools and its runtime
# deps, fetched once with a throw-away pom (as broker.sh does for kafka_2.13).
ensure_tools_libs() {
  local v=$1 dir
  dir=$KAFKA_CACHE_DIR/tools-$v
  if [ -f "$dir/.complete" ] && compgen -G "$dir/libs/kafka-tools-$v.jar" >/dev/null; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found"
  log "fetching org.apache.kafka:kafka-tools:$v with Maven into $dir/libs"
  rm -rf "$dir/libs" "$dir/libs.tmp" "$dir/pom"
  mkdir -p "$dir/pom"
  cat >"$dir/pom/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>onceflow.integration</groupId>
  <artifactId>kafka-tools-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$v</version>
    </dependency>
  </dependencies>
  <build><pluginManagement><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId>
    <artifactId>maven-dependency-plugin</artifactId>
    <version>3.8.1</version>
  </plugin></plugins></pluginManagement></build>
</project>
POM
  mvn -q -B -Dstyle.color=never -f "$dir/pom/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$dir/libs.tmp" >"$dir/mvn.log" 2>&1 \
    || { tail -n 30 "$dir/mvn.log" >&2; die "mvn could not fetch kafka-tools:$v"; }
  mv "$dir/libs.tmp" "$dir/libs"
  touch "$dir/.complete"
}

# -------------------------------------------------------------- cleanup ----

SUPERVISORS=()
cleanup() {
  local rc=$?
  set +e
  touch "$RUN/stop"
  local p pid
  for p in $(seq 0 $((COPIERS - 1))); do
    pid=$(cat "$RUN/copier-$p.pid" 2>/dev/null)
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${SUPERVISORS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for p in $(seq 0 $((COPIERS - 1))); do
    pid=$(cat "$RUN/copier-$p.pid" 2>/dev/null)
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
  done
  if [ -n "${BROKER_STARTED:-}" ]; then
    # keep the broker's logs, then stop it (this removes its data dir)
    cp "$KAFKA_STATE_DIR/broker.log" "$RUN/broker.log" 2>/dev/null
    cp "$KAFKA_STATE_DIR/server.properties" "$RUN/server.properties" 2>/dev/null
    "$BROKER_SH" stop >>"$RUN/broker-sh.log" 2>&1
    gzip -f "$RUN/broker.log" 2>/dev/null
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- setup ----

ensure_tools_libs "$TOOLS_VERSION"
TLIBS=$(tools_libs "$TOOLS_VERSION")
# the broker libs are fetched by broker.sh start below; the slf4j 1.7 binding
# there gives the client tools log4j2 logging (kafka-tools ships none)
BLIBS=$KAFKA_CACHE_DIR/kafka-$KAFKA_VERSION/libs

log "results in $RUN (broker $KAFKA_VERSION, client tools $TOOLS_VERSION, port $KAFKA_PORT)"
BROKER_STARTED=1
"$BROKER_SH" start >>"$RUN/broker-sh.log" 2>&1 || { tail -n 30 "$RUN/broker-sh.log" >&2; die "broker.sh start failed"; }
log "broker up: $("$BROKER_SH" status 2>/dev/null || true)"

SLF4J_BIND=$(ls "$BLIBS"/log4j-slf4j-impl-*.jar 2>/dev/null | head -1 || true)
CP="$TLIBS/*${SLF4J_BIND:+:$SLF4J_BIND}"

cat >"$RUN/client-log4j2.properties" <<'L4J'
status = warn
name = finding3-client
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.txn.level = INFO
logger.prod.name = org.apache.kafka.clients.producer.KafkaProducer
logger.prod.level = INFO
L4J

# a client tool's JVM with our classpath and logging; an array, not a
# function, so that "${JCLIENT[@]}" MAIN ... & makes $! the JVM's own pid
# (a function in the background would be a subshell, and SIGKILLing that
# would leave the JVM running on)
JCLIENT=(java -Xms64m -Xmx384m -XX:+UseSerialGC "-Dlog4j2.configurationFile=$RUN/client-log4j2.properties" -cp "$CP")
jrun() { "${JCLIENT[@]}" "$@"; }

# LSO probe: per partition, the high watermark (read_uncommitted end offset)
# and the last stable offset (read_committed end offset), from the Java
# consumer. Compiled once per run into the state dir.
mkdir -p "$STATE/probe-$TOOLS_VERSION"
cat >"$STATE/probe-$TOOLS_VERSION/F3Probe.java" <<'JAVA'
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** F3Probe BOOTSTRAP TOPIC: prints "partition hw lso" per partition. */
public class F3Probe {
    static Map<TopicPartition, Long> end(String bs, String topic, String iso) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("isolation.level", iso);
        p.put("default.api.timeout.ms", "8000");
        p.put("request.timeout.ms", "5000");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
            return c.endOffsets(tps);
        }
    }
    public static void main(String[] a) {
        Map<TopicPartition, Long> hw = end(a[0], a[1], "read_uncommitted");
        Map<TopicPartition, Long> lso = end(a[0], a[1], "read_committed");
        List<TopicPartition> tps = new ArrayList<>(hw.keySet());
        tps.sort(Comparator.comparingInt(TopicPartition::partition));
        for (TopicPartition tp : tps) System.out.println(tp.partition() + " " + hw.get(tp) + " " + lso.get(tp));
    }
}
JAVA
if [ ! -f "$STATE/probe-$TOOLS_VERSION/F3Probe.class" ]; then
  javac -nowarn -cp "$TLIBS/*" -d "$STATE/probe-$TOOLS_VERSION" "$STATE/probe-$TOOLS_VERSION/F3Probe.java" \
    || die "javac F3Probe failed"
fi
probe() { # probe TOPIC -> "partition hw lso" lines (empty on failure)
  timeout 30 java -Xmx128m -XX:+UseSerialGC "-Dlog4j2.configurationFile=$RUN/client-log4j2.properties" \
    -cp "$STATE/probe-$TOOLS_VERSION:$CP" F3Probe "$BOOT" "$1" 2>>"$RUN/probe.err" || true
}

# ------------------------------------------------------------ topics -------

if [ -n "$TXN_VERSION" ]; then
  for cmd in downgrade upgrade; do
    jrun org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOT" $cmd \
      --feature "transaction.version=$TXN_VERSION" >>"$RUN/features.log" 2>&1 && break
  done
fi
jrun org.apache.kafka.tools.FeatureCommand --bootstrap-server "$BOOT" describe >>"$RUN/features.log" 2>&1 || true
log "features: $(grep -o 'Feature: transaction.version.*FinalizedVersionLevel: [0-9]*' "$RUN/features.log" | tail -n 1 | tr -s '\t ' ' ')"

for t in $IN $OUT; do
  jrun org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOT" --create --topic "$t" \
    --partitions "$PARTS" --replication-factor 1 >>"$RUN/topics.log" 2>&1 \
    || { cat "$RUN/topics.log" >&2; die "creating topic $t failed"; }
done
log "created $IN and $OUT with $PARTS partitions each"

# ------------------------------------------------------------- seed --------

cat >"$RUN/seed-producer.properties" <<'P'
acks=all
enable.idempotence=true
retries=2147483647
max.in.flight.requests.per.connection=5
linger.ms=5
batch.size=65536
P
t0=$(now)
timeout 300 java -Xmx512m "-Dlog4j2.configurationFile=$RUN/client-log4j2.properties" -cp "$CP" \
  org.apache.kafka.tools.VerifiableProducer --bootstrap-server "$BOOT" --topic "$IN" \
  --max-messages "$RECORDS" --acks -1 --repeating-keys 1000 --command-config "$RUN/seed-producer.properties" \
  2>"$RUN/seed.err" | grep -c '"name":"producer_send_success"' >"$RUN/seed.acked" || true
acked=$(cat "$RUN/seed.acked")
[ "$acked" = "$RECORDS" ] || die "seed: $acked of $RECORDS acked (see $RUN/seed.err)"
probe $IN >"$RUN/input-offsets.txt"
log "seeded $RECORDS records in $(( $(now) - t0 ))s; input partition hw lso: $(tr '\n' ';' <"$RUN/input-offsets.txt")"
[ "$(awk '{s += $2} END {print s + 0}' "$RUN/input-offsets.txt")" = "$RECORDS" ] || die "input end offsets do not add up to $RECORDS"

# ------------------------------------------------------------ copiers ------

if [ "$COPIER" = spread ]; then
  mkdir -p "$STATE/spread-$TOOLS_VERSION"
  javac -nowarn -cp "$TLIBS/*" -d "$STATE/spread-$TOOLS_VERSION" "$SCRIPT_DIR/F3SpreadCopier.java" \
    >>"$RUN/javac.log" 2>&1 || die "javac F3SpreadCopier failed"
  JSPREAD=(java -Xms64m -Xmx384m -XX:+UseSerialGC "-Dlog4j2.configurationFile=$RUN/client-log4j2.properties"
    -cp "$STATE/spread-$TOOLS_VERSION:$CP")
fi
spread_parts() { # spread_parts C: input partitions p with p % COPIERS == C, comma-separated
  local p out=
  for p in $(seq 0 $((PARTS - 1))); do [ $((p % COPIERS)) = "$1" ] && out=$out${out:+,}$p; done
  echo "$out"
}
ABORT_FLAG=
[ "$RANDOM_ABORTS" = 1 ] && ABORT_FLAG=--enable-random-aborts
GROUP_FLAG=
[ "$GROUP_MODE" = 1 ] && GROUP_FLAG=--group-mode
# supervise P: run the copier for input partition P until it exits 0
# (everything up to the end offset seen at its start copied) or we stop.
supervise() {
  set +e
  local p=$1 n=0 rc pid
  while [ ! -f "$RUN/stop" ]; do
    n=$((n + 1))
    echo "$(ts) start #$n" >>"$RUN/copier-$p.events"
    if [ "$COPIER" = spread ]; then
      "${JSPREAD[@]}" F3SpreadCopier "$BOOT" "copier-$p" "$GROUP" "$IN" "$(spread_parts "$p")" "$OUT" \
        "$TXN_SIZE" "$TXN_TIMEOUT_MS" >>"$RUN/copier-$p.out" 2>>"$RUN/copier-$p.err" &
    else
      "${JCLIENT[@]}" org.apache.kafka.tools.TransactionalMessageCopier \
        --broker-list "$BOOT" --transactional-id "copier-$p" --consumer-group "$GROUP" \
        --input-topic "$IN" --input-partition "$p" --output-topic "$OUT" \
        --max-messages -1 --transaction-size "$TXN_SIZE" --transaction-timeout "$TXN_TIMEOUT_MS" \
        --use-group-metadata $ABORT_FLAG $GROUP_FLAG >>"$RUN/copier-$p.out" 2>>"$RUN/copier-$p.err" &
    fi
    pid=$!
    echo "$pid" >"$RUN/copier-$p.pid"
    wait "$pid"
    rc=$?
    echo "$(ts) exit #$n rc=$rc" >>"$RUN/copier-$p.events"
    if [ "$rc" = 0 ]; then
      touch "$RUN/copier-$p.done"
      return 0
    fi
    sleep 2
  done
}

for p in $(seq 0 $((COPIERS - 1))); do
  supervise "$p" &
  SUPERVISORS+=($!)
done
log "started $COPIERS copiers ($COPIER; txn size $TXN_SIZE, txn timeout ${TXN_TIMEOUT_MS}ms, --use-group-metadata $ABORT_FLAG $GROUP_FLAG)"

# copied: input records committed so far, from each copier's last status
# line ("remaining" counts from its committed position to the input end
# offset, so this holds across copier restarts). No JVM: cheap to poll.
# In group mode "remaining" covers the copier's current assignment; a copier
# that has not reported yet counts as having everything left.
copied() {
  local p n rem left=0
  for p in $(seq 0 $((COPIERS - 1))); do
    if [ "$GROUP_MODE" = 1 ]; then n=$RECORDS
    elif [ "$COPIER" = spread ]; then n=$(awk -v c="$p" -v k="$COPIERS" '$1 % k == c {s += $2} END {print s + 0}' "$RUN/input-offsets.txt")
    else n=$(awk -v p="$p" '$1 == p {print $2}' "$RUN/input-offsets.txt"); fi
    rem=$(tail -n 5 "$RUN/copier-$p.out" 2>/dev/null | grep -o '"remaining":[0-9]*' | tail -n 1 | cut -d: -f2 || true)
    # before its first assignment a group-mode copier reports Long.MAX_VALUE
    if [ -z "$rem" ] || [ "${#rem}" -gt 12 ] || [ "$rem" -gt "$RECORDS" ]; then rem=$n; fi
    left=$((left + rem))
  done
  [ "$left" -gt "$RECORDS" ] && left=$RECORDS
  echo $((RECORDS - left))
}
all_done() {
  local p
  for p in $(seq 0 $((COPIERS - 1))); do [ -f "$RUN/copier-$p.done" ] || return 1; done
}

copy_deadline=$(( $(now) + COPY_TIMEOUT ))
kills=0
for k in $(seq 1 "$KILLS"); do
  # thresholds 20 %, 45 %, 70 % for 3 kills; evenly spread otherwise
  if [ "$KILLS" = 3 ]; then pct=$(( (k - 1) * 25 + 20 )); else pct=$(( k * 80 / (KILLS + 1) )); fi
  target=$(( RECORDS * pct / 100 ))
  while :; do
    all_done && break
    [ "$(now)" -ge "$copy_deadline" ] && break
    s=$(copied)
    [ "$s" -ge "$target" ] && break
    sleep 0.2
  done
  if all_done; then log "copiers finished before kill $k (threshold $pct %)"; break; fi
  [ "$(now)" -ge "$copy_deadline" ] && { log "copy deadline reached before kill $k"; break; }
  log "kill $k at $s records copied (>= $pct % of $RECORDS): broker SIGKILL"
  "$BROKER_SH" kill >>"$RUN/broker-sh.log" 2>&1
  kills=$((kills + 1))
  if [ "$KILL_COPIERS" = 1 ]; then
    for p in $(seq 0 $((COPIERS - 1))); do
      [ -f "$RUN/copier-$p.done" ] && continue
      pid=$(cat "$RUN/copier-$p.pid" 2>/dev/null || true)
      [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && echo "$(ts) SIGKILL by harness (kill $k)" >>"$RUN/copier-$p.events"
    done
    log "also SIGKILLed the running copiers"
  fi
  sleep "$DOWN_SECS"
  t0=$(now)
  "$BROKER_SH" restart >>"$RUN/broker-sh.log" 2>&1 || { tail -n 30 "$RUN/broker-sh.log" >&2; die "broker restart $k failed"; }
  log "broker restarted after kill $k in $(( $(now) - t0 ))s"
done

while ! all_done && [ "$(now)" -lt "$copy_deadline" ]; do sleep 2; done
copy_ok=yes
if ! all_done; then
  copy_ok=no
  log "copy phase timed out after ${COPY_TIMEOUT}s; copiers not done: $(for p in $(seq 0 $((COPIERS - 1))); do [ -f "$RUN/copier-$p.done" ] || printf '%s ' "$p"; done)"
fi
touch "$RUN/stop"
for pid in "${SUPERVISORS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
for p in $(seq 0 $((COPIERS - 1))); do
  pid=$(cat "$RUN/copier-$p.pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
done
restarts=$(cat "$RUN"/copier-*.events | grep -c ' start #' || true)
restarts=$((restarts - COPIERS))
log "copy phase over (all done: $copy_ok, broker kills: $kills, copier restarts: $restarts)"

# ---------------------------------------------------------- LSO wait -------

lso_deadline=$(( $(now) + LSO_WAIT ))
while :; do
  probe $OUT >"$RUN/offsets.txt"
  stuck=$(awk '$3 < $2 {printf "%s ", $1}' "$RUN/offsets.txt")
  [ -s "$RUN/offsets.txt" ] && [ -z "$stuck" ] && break
  [ "$(now)" -ge "$lso_deadline" ] && break
  sleep 3
done
[ -s "$RUN/offsets.txt" ] || { stuck=probe-failed; log "LSO probe failed (see $RUN/probe.err)"; }
log "output partition hw lso: $(tr '\n' ';' <"$RUN/offsets.txt")"
[ -n "$stuck" ] && log "LSO below HW ${LSO_WAIT}s after the copy on partitions: $stuck"

# ------------------------------------------------------- transactions ------

tx() { timeout 60 java -Xmx128m -cp "$CP" org.apache.kafka.tools.TransactionsCommand --bootstrap-server "$BOOT" "$@" 2>&1 | grep -v '^SLF4J' || true; }
{
  echo "## list"; tx list
  for p in $(seq 0 $((COPIERS - 1))); do echo "## describe copier-$p"; tx describe --transactional-id "copier-$p"; done
  for p in $(seq 0 $((PARTS - 1))); do echo "## describe-producers $OUT/$p"; tx describe-producers --topic "$OUT" --partition "$p"; done
  echo "## find-hanging (open > 1 min)"; tx find-hanging --broker-id 1 --max-transaction-timeout 1
} >"$RUN/transactions.txt"

# ----------------------------------------------------------- read back -----

readback() { # readback TOPIC FILE: read_committed, "partition offset value"
  timeout 300 java -Xmx512m "-Dlog4j2.configurationFile=$RUN/client-log4j2.properties" -cp "$CP" \
    org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$BOOT" --topic "$1" \
    --from-beginning --isolation-level read_committed --timeout-ms 15000 \
    --group "f3-verify-$1-$LABEL" \
    --formatter-property print.partition=true --formatter-property print.offset=true \
    2>>"$RUN/readback.err" \
    | sed -n 's/^Partition:\([0-9]*\)[[:space:]]*Offset:\([0-9]*\)[[:space:]]*\(.*\)$/\1 \2 \3/p' >"$2" || true
}
readback $IN "$RUN/input.txt"
readback $OUT "$RUN/output.txt"
awk '{print $3}' "$RUN/input.txt" | sort >"$RUN/input.values"
awk '{print $3}' "$RUN/output.txt" | sort >"$RUN/output.values"
inputs=$(wc -l <"$RUN/input.values")
in_unique=$(uniq "$RUN/input.values" | wc -l)
outputs=$(wc -l <"$RUN/output.values")
unique=$(uniq "$RUN/output.values" | wc -l)
dups=$((outputs - unique))
uniq "$RUN/input.values" >"$RUN/input.set"
uniq "$RUN/output.values" >"$RUN/output.set"
missing=$(comm -23 "$RUN/input.set" "$RUN/output.set" | wc -l)
extra=$(comm -13 "$RUN/input.set" "$RUN/output.set" | wc -l)
[ "$inputs" = "$in_unique" ] || log "WARNING: input has duplicate values ($inputs records, $in_unique distinct)"
[ "$inputs" = "$RECORDS" ] || log "WARNING: read back $inputs input records, seeded $RECORDS"
if [ "$dups" -gt 0 ]; then
  # every copy of each duplicated value, with its output partition and offset
  uniq -d "$RUN/output.values" >"$RUN/dup.values"
  awk 'NR == FNR {d[$1] = 1; next} ($3 in d) {print $3, "p" $1, $2}' "$RUN/dup.values" "$RUN/output.txt" \
    | sort -k1,1n -k3,3n >"$RUN/dup-detail.txt"
  # runs of duplicated output offsets per partition: "partition first last count"
  awk 'NR == FNR {d[$1] = 1; next} ($3 in d) {print $1, $2}' "$RUN/dup.values" "$RUN/output.txt" \
    | sort -k1,1n -k2,2n \
    | awk '$1 != p || $2 != l + 1 {if (n) print p, f, l, n; p = $1; f = $2; n = 0} {l = $2; n++} END {if (n) print p, f, l, n}' \
    >"$RUN/dup-ranges.txt"
fi
[ "$missing" -gt 0 ] && comm -23 "$RUN/input.set" "$RUN/output.set" | head -1000 >"$RUN/missing.values"
log "read_committed: inputs $inputs, outputs $outputs, distinct $unique, duplicates $dups, missing $missing, unexpected $extra"

# ---------------------------------------------------------------- dumps ----

problem=no
{ [ "$dups" -gt 0 ] || [ "$missing" -gt 0 ] || [ -n "$stuck" ] || [ "$copy_ok" = no ]; } && problem=yes

DATA=$(cat "$KAFKA_STATE_DIR/data.dir")/logs
if unzip -l "$TLIBS/kafka-tools-$TOOLS_VERSION.jar" org/apache/kafka/tools/DumpLogSegments.class >/dev/null 2>&1; then
  DUMP_CP="$CP"; DUMP_MAIN=org.apache.kafka.tools.DumpLogSegments
else
  DUMP_CP="$BLIBS/*"; DUMP_MAIN=kafka.tools.DumpLogSegments   # 4.2.x and older: in kafka_2.13
fi
dump() { # dump OUTFILE FLAGS... -- FILES...
  local out=$1; shift
  local flags=()
  while [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  local files
  files=$(printf '%s,' "$@"); files=${files%,}
  timeout 300 java -Xmx512m -cp "$DUMP_CP" "$DUMP_MAIN" "${flags[@]}" --files "$files" 2>&1 \
    | grep -v '^SLF4J' >"$out" || true
}
mkdir -p "$RUN/dumps"
for d in "$DATA"/__transaction_state-*; do
  dump "$RUN/dumps/$(basename "$d").txt" --transaction-log-decoder -- "$d"/*.log
done
for d in "$DATA"/__consumer_offsets-*; do
  [ -n "$(find "$d" -name '*.log' -size +0c)" ] || continue
  dump "$RUN/dumps/$(basename "$d").txt" --offsets-decoder -- "$d"/*.log
done
if [ "$DUMP_OUTPUT" = always ] || [ "$problem" = yes ]; then
  for d in "$DATA"/$OUT-*; do
    # batch headers only: baseOffset/lastOffset, producerId/Epoch, isTransactional, isControl
    dump "$RUN/dumps/$(basename "$d").batches.txt" -- "$d"/*.log
    # control records (commit/abort markers) with their coordinator epoch
    grep -q 'isControl: true' "$RUN/dumps/$(basename "$d").batches.txt" && \
      dump "$RUN/dumps/$(basename "$d").markers.txt" --deep-iteration -- "$d"/*.log
    [ -f "$RUN/dumps/$(basename "$d").markers.txt" ] && \
      grep -E 'endTxnMarker|isControl: true' "$RUN/dumps/$(basename "$d").markers.txt" >"$RUN/dumps/$(basename "$d").markers.tmp" && \
      mv "$RUN/dumps/$(basename "$d").markers.tmp" "$RUN/dumps/$(basename "$d").markers.txt"
  done
fi
gzip -f "$RUN"/dumps/*.txt "$RUN/output.txt" "$RUN/input.txt" 2>/dev/null || true
rm -f "$RUN/input.values" "$RUN/output.values" "$RUN/input.set" "$RUN/output.set"

# broker log excerpts: restarts, elections, coordinator loading, fencing
grep -E 'Kafka Server started|unclean|Unclean|Loaded transaction metadata|Finished loading|Loading transaction|Completed load|transaction coordinator|TransactionCoordinator|OutOfOrderSequence|InvalidProducerEpoch|ProducerFenced|TransactionAbortedException|hanging|Hanging|abort|Abort|ERROR|FATAL' \
  "$KAFKA_STATE_DIR/broker.log" 2>/dev/null | grep -v 'kafka.request.logger' | head -3000 >"$RUN/broker-excerpt.log" || true

verdict=EXACTLY-ONCE
[ "$problem" = yes ] && verdict=PROBLEM
summary="$KAFKA_VERSION $TOOLS_VERSION $LABEL aborts=$RANDOM_ABORTS killcopiers=$KILL_COPIERS groupmode=$GROUP_MODE copier=$COPIER tv=${TXN_VERSION:-default} $inputs $outputs $unique $dups $missing ${stuck:-none} $kills $restarts $verdict"
summary=$(echo "$summary" | tr -s ' ')
[ -f "$RESULTS_ROOT/summary.tsv" ] || echo "version tools run random_aborts kill_copiers group_mode copier txn_version inputs outputs unique dups missing stuck_partitions kills copier_restarts verdict" | tr ' ' '\t' >"$RESULTS_ROOT/summary.tsv"
echo "$summary" | tr ' ' '\t' >>"$RESULTS_ROOT/summary.tsv"
echo "$summary" >"$RUN/summary.txt"
log "summary: $summary"
echo "$summary"
[ "$verdict" = EXACTLY-ONCE ] && exit 0 || exit 1
