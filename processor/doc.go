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
// Both are off by default and then cost nothing per record.
// Processor.Health, served by HealthHandler, says whether the instance is
// ready (joined, claimed, restored) and live (its loop and its records
// make progress), for an orchestrator's probes. See docs/operations.md
// for the metrics reference, the probes and what to alert on.
package processor

// The house map, for readers of the package's code: its files from the
// ground up. A file uses only the files below it (a keyspace's part,
// which a partition holds, is the one name partition.go takes from
// above), and no piece holds a pointer to its owner: each gets the values
// or the small interface it needs.
//
//	internal/sched  the worker pool: sessions' units one at a time, sessions in parallel,
//	                backoffs off the workers; knows nothing of Kafka or of this package
//	partition.go    the ground: tp, the record in flight (item; its Emitter and State
//	                are views of it in handler.go and state.go), a partition's records
//	                in offset order and its commit point, the commit plan
//	errors.go       sentinel and typed errors; why records are dead-lettered and
//	                transactions aborted
//	config.go       the With… options, defaults and validation, the retry policy, client
//	                logging, changelog names, test hooks
//	observe.go      counters behind Stats, metrics, tracing, end offsets, log attributes
//	transaction.go  one transaction: its client (txnClient), produce, its open gate
//	keyspace.go     what the loop sees of a changelog-backed keyspace, and its restores
//	state.go        session state as a keyspace, and a handler's State
//	handler.go      one attempt of the handler: panics, error classes, retries, dead letters
//	partitions.go   the record path: intake, dispatch, the completion queue, drain and
//	                admission, stuck records, backpressure, revokes and rewinds
//	dedupe.go       event-ID marks as a keyspace, Once and EventID
//	group.go        the group callbacks' news for the loop
//	admin.go        side clients: access and start checks, the topic watch, changelog topics
//	positions.go    the position guard's log (a keyspace)
//	committer.go    the commit path: the open transaction and the one ending, in order;
//	                the commit schedule and the byte budget
//	lifetime.go     one transactional client's loop: poll, news, drain, commit, abort
//	stopatend.go    the end watch of a bounded run (WithStopAtEnd)
//	run.go          one Run call: the pool, the stores, the instance ID's hold; builds
//	                each lifetime and its client
//	processor.go    Processor: New, Run, Stats
//	health.go       Health and its HTTP handler, from what Run and the loop report
//	                (healthState, observe.go)
//
// One record goes lifetime.poll -> partitions.intake (partition.track,
// dispatchWindow) -> sched.Pool -> handlers.attempt -> completionQueue ->
// partitions.drain (tryAdmit, transaction.produce) -> lifetime.startCommit
// -> committer.end (on its own goroutine) -> lifetime.takeCommit. The
// partition's keyspaces see it at three of these steps: screen before
// dispatch, produce at admission, apply after commit.
