// Package processor runs exactly-once read-process-write jobs on Kafka with
// per-session ordering and parallelism inside a partition.
//
// A Processor consumes its input topics read_committed, hands each record
// to a Handler and commits the records the handler emitted, any dead-letter
// records and the input offsets in one Kafka transaction (see package txn
// for identities, fencing and the error taxonomy). For a loop of your own
// instead of a handler per record, use package txn directly; statestore
// and dedupe, which back WithStateStore and WithDedupe, work on their own
// too.
//
// New takes the With… options (see Opt); each one's documentation gives
// its default and the Kafka or Kafka Streams setting it corresponds to.
//
// # Ordering and parallelism
//
// Records of one session (by default the record key) are handled one at a
// time, in offset order; different sessions run in parallel on a pool of
// worker goroutines that grows while handlers block and shrinks when idle.
// A session costs memory only while it has records. Transient errors are
// retried with exponential backoff and jitter; while a session backs off
// it gives up its worker, and its later records wait while other sessions
// go on. Permanent errors, exhausted retries and (optionally) stuck records
// go to the dead-letter topic, in the same transaction, with headers saying
// why.
//
// # Commits
//
// The loop commits as soon as finished work is waiting and the load allows
// (at most WithCommitInterval apart), per partition the offset of the
// lowest unfinished record, and encodes the finished records above it in
// the offset commit's metadata (internal/offsetmeta). After a restart or a
// rebalance the partition's next owner reads that metadata and skips
// exactly those records, whose outputs are already committed. The metadata
// is bounded (the broker's offset.metadata.max.bytes): when a partition's
// map is full, further completions wait and its fetching pauses, so the map
// is never dropped. Handlers keep running while a transaction commits;
// what finishes meanwhile goes into the next one, which fills on the next
// producer of the instance's ring (WithTransactionPipeline) and commits
// right after: commits stay in order, an abort aborts the next one too,
// and its records reach each partition after the ending one's.
//
// # Group protocols
//
// WithGroupProtocol chooses the classic protocol (the default) or KIP-848's
// consumer protocol (Kafka 4.0+). The guarantees are the same: a rebalance
// waits until what finished is committed under the member's current
// generation or epoch, and a zombie cannot commit. Under KIP-848
// partitions that stay put keep committing through a rebalance, and the
// first holder of an instance ID keeps it until it leaves or its session
// expires (docs/operations.md). Under both, a stop keeps the instance's
// static membership for its restart (a rolling restart), and
// WithLeaveOnStop or Processor.LeaveOnStop make a stop for good (a
// scale-down) leave the group, so that its partitions move at once.
//
// # What exactly-once covers
//
// Outputs, dead-letter records and input offsets are atomic: a record's
// outputs become visible once, together with its offset, or never. Work
// done outside Kafka (HTTP calls, database writes) is not covered: an
// aborted transaction, a crash or a rebalance runs the handler again for
// records that were not committed. Make such effects idempotent: Once runs
// an effect at most once per event ID in the normal case, and the event ID
// (EventID) serves as idempotency key for the crash windows that remain.
//
// # Deduplication
//
// WithDedupe skips records whose event ID (by default the event-id
// header) was already processed in their partition: duplicates that an
// upstream application sent, which Kafka's idempotent producer cannot
// catch. The marks commit with the transaction through a changelog topic,
// as session state does, and follow the partition to its next owner.
//
// # Position guard
//
// The group coordinator is the one record of how far each partition got.
// WithPositionGuard keeps a second one: each transaction also writes the
// positions it commits to a compacted topic, and a newly assigned
// partition resumes from the later of the two, so a coordinator that
// serves an older offset (or none) no longer makes the new owner redo and
// re-emit what was committed since.
//
// # Observability
//
// WithMetrics registers Prometheus metrics (prefixed onceflow_, plus the
// client's own under onceflow_kafka_) on a registry of yours;
// WithTracerProvider traces each record with OpenTelemetry, continuing the
// W3C trace context of its input's headers into its outputs' headers.
// Both are off by default and then cost nothing per record. See
// docs/operations.md for the metrics reference and what to alert on.
package processor

// A map of the package's types, for readers of its code. One record goes
// lifetime.poll -> partitions.intake (partition.track, dispatchWindow) ->
// dispatcher -> worker (turn.go: runTurn, attempt) -> completionQueue ->
// partitions.drain (tryAdmit, transaction.produce) -> lifetime.startCommit
// -> committer.end (on its own goroutine) -> lifetime.takeCommit.
// The partition's keyspaces (keyspace.go) see it at three of these
// steps: screen before dispatch, produce at admission, apply after commit.
//
//	Processor          processor.go   options, counters, metrics; Run builds a run
//	config             config.go      what the Opts (options.go) set; defaults and validation
//	run                run.go         one Run call: workers, completion queue, local stores,
//	                                  the instance ID's hold (txncore.Instance); builds each
//	                                  lifetime and its client
//	lifetime           lifetime.go    one transactional session: the loop's skeleton (poll,
//	                                  group news, commit plans, their results, abort)
//	partitions         partitions.go  the record path: intake, dispatch window, drain and
//	                                  admission, stuck records, backpressure, revoke, rewind
//	txnClient          client.go      what the loop needs of txncore.Session; faked in tests
//	committer          committer.go   the open transaction and the one ending, in order;
//	                                  the offset commit's rewrite
//	transaction        transaction.go one transaction: produce, promises, counts
//	openGate           opengate.go    its records wait for the one before; its first goes out alone
//	commitSchedule     schedule.go    when the next commit starts
//	groupEvents        group.go       the group callbacks' news for the loop
//	endOffsets         endoffsets.go  listed end offsets, for the lag gauge
//	restores           restore.go     changelog restores of newly assigned partitions
//	partition, item    partition.go   a partition's records in offset order; commit point
//	dispatcher         dispatch.go    sessions, the run queue and the worker pool
//	                   turn.go        one session's turn on a worker; retries
//	completionQueue    completions.go finished items back to the loop
//	keyspace,          keyspace.go    a changelog-backed keyspace as the loop sees it: restore,
//	keyspacePart                      screen, produce, plan, apply after commit, rewind; the
//	                                  partitions hold them as a list, a partition its parts
//	stateKeyspace      statesync.go   session state: the store, apply, restore target
//	partState          state.go       a partition's unapplied state, read by handlers
//	dedupeKeyspace,    dedupesync.go  event-ID marks: screening, marks, apply
//	partDedupe
//	dedupeTarget       dedupetarget.go a partition's marks in the dedupe store; restore target
//	positionLog        positions.go   the position guard's log
//	testHooks          hooks.go       crash-test hooks, on the Processor, not in config
