// Command eosbench benchmarks and verifies exactly-once
// consume-transform-produce pipelines on Kafka.
//
// With no flags it starts an embedded kfake cluster, produces 1,000,000
// keyed records (1,000 sessions, 6 partitions) and runs four pipelines
// over that same input, one after another, -count times over (3 by
// default, interleaved: A B C D A B C D ...), each run with its own output
// topic and consumer group:
//
//	alo-raw             franz-go consumer group, flush then commit: at-least-once, the ceiling
//	franz-gts           franz-go GroupTransactSession: exactly-once, serial per poll
//	onceflow-partition  onceflow, each partition in order
//	onceflow-session    onceflow, each session (key) in order, sessions in parallel
//
// -modes also takes onceflow-unordered (order not promised, so order
// violations are reported but not judged) and onceflow, whose ordering is
// -order's.
//
// Two peers run on the JVM, as subprocesses (-workers n: n instances of one
// application, at least one), fed, read back and verified as the Go modes
// are, each running the same handler (the same SHA-256 rounds, sleeps and
// faulty records, faults retried in place; duplicated inputs passed
// through once each, as franz-gts does):
//
//	kafka-streams      Kafka Streams 4.4.0, exactly_once_v2, commit.interval.ms
//	                   = -commit-interval (100ms, its own EOS default), one stream
//	                   thread per input partition an instance owns
//	                   (kafka-streams+cores: one stream thread per core,
//	                   runtime.NumCPU, instead; other settings its defaults)
//	parallel-consumer  Confluent Parallel Consumer 0.5.3.2, transactional
//	                   (PERIODIC_TRANSACTIONAL_PRODUCER), KEY order
//
// Their Java sources are embedded in this binary and built on first use
// with Maven and javac (internal/bench/jvm/build.sh; Java 17+ and Maven,
// installed with apt-get when missing and root) into a cache directory
// ($EOSBENCH_JVM_CACHE, default onceflow-eosbench-jvm in the user's cache
// directory), once per machine for each version of the sources. Their
// processes start before the timed run and wait until it starts, so that
// the JVM's own start-up is not timed (a Go binary is loaded before its
// run too). kafka-streams runs on the embedded cluster as on real brokers;
// parallel-consumer needs -brokers (its kafka-clients 3.7.0 producer fails
// against kfake's API versions). The
// summary sets every mode beside kafka-streams (ratio_to_kafka_streams in
// -json). Their commits are timed by the frameworks' own metrics: Kafka
// Streams keeps a count, a mean and a max; Parallel Consumer's producer a
// total.
//
// Before the first timed run, eosbench creates every run's topics and
// warms up what all modes share, so that no mode pays for another's setup
// (on a fresh real broker, franz-gts run first made 18,079 rec/s against
// about 400,000 warm): one committed transaction with a transactional ID
// of its own, and one group offset commit (the coordinators' internal
// topics then exist and are loaded); then it waits until every broker knows
// every topic with a leader for each partition, and asks each partition's
// leader for its end offset. One line on stderr says what the warm-up took.
//
// A read_committed consumer started before each run timestamps outputs as
// they become visible: throughput is inputs over the window from the first
// input available to the last output visible, and latency is visibility
// time minus the input's production time (or the run's start, when the
// input was produced before the run). Every run reports its time to first
// output (first_output_ms in -json): from its start (the pipeline started,
// or the JVM released) to its first record visible.
//
// The fair start: a paced run (-rate) first writes a primer, the shortest
// prefix of the inputs whose sessions reach every input partition (at
// most a tenth of them), and starts its feed and its clock only once every
// primer input has been output. So every mode's latency counts from the
// same point, with its group joined, its tasks made and its transactional
// producers initialised: a mode's start-up (Kafka Streams' is seconds) is
// not its records' latency. The primer is verified with the rest but not
// timed and not in rec/s ("primer" in -json). After each run the output is read
// back read_committed and verified by internal/verify: duplicates, lost
// inputs and per-session order violations. The exit status is 1 if an
// exactly-once mode fails verification (or the at-least-once one loses
// records, or a run times out). The input producer, the read-back and the
// verifier retry the brokers' transient errors (a refused dial, a moved
// leader or coordinator, a topic not known yet, a timeout) until -timeout,
// so a FAIL is a broken guarantee; its text names the first duplicated,
// lost or out-of-order input.
//
// A run judged FAIL leaves its evidence (evidence in -json): the
// invocation's topics and groups are kept on the brokers whatever -keep
// says, and their name prefix printed; each worker's log (at info at
// least, whatever -log-level passes to stderr) stays in
// $TMPDIR/<prefix>-<run>-logs/<instance ID>.log, removed when the run
// passes; the output is read back a second time with a fresh client and
// the two verdicts compared; and the first duplicated input is traced to
// every copy's partition, offset, producer ID and epoch, with the
// transactional ID the brokers list for that producer (an instance's ring
// ID, e.g. <group>/w3#1).
//
// A run ends at a commit, so a run of a fraction of a second is at the
// mercy of the machine and of where its commit intervals fall: modes are
// compared by the medians of their runs, interleaved so that drift falls
// on every mode alike. (On the project's 2-core machine, the
// onceflow-session/franz-gts ratios of two back-to-back invocations were
// up to 2x apart with one run of 100,000 records and up to 27% apart with
// 7 runs of 200,000; with the default 3 runs of 1,000,000, six invocations
// were within 15% of each other.) The table has a row per run, in the
// order they ran, then a row per mode with the median throughput of its
// runs, their minimum and maximum, and ratios of medians (×gts, ×alo; each
// run's ratios are to the baselines' medians too). Runs are grouped by
// mode name, so a mode listed twice in -modes counts as one mode with more
// runs. A run's "cores us/all" are the cores used on average while it
// processed, by eosbench's process (its in-process pipelines, the embedded
// cluster, the observer) and by the whole machine, other jobs included
// (read from /proc; cores_eosbench, cores_machine and machine_cores in
// -json): on a shared machine a parallel mode gains only the cores the
// others leave it. Each run that committed has a line with its commits'
// round trip (flush, offsets and, but for alo-raw, EndTxn): median, p99,
// max and mean (commit_p50_ns, commit_p99_ns, commit_max_ns and commit_ns
// over commits in -json's counters). A record waits at least the round
// trip of the transaction it lands in: on the chat scenario set the
// records' p50 beside the commits' median, which a few slow commits do not
// pull up as they do the mean. Runs of several workers show the highest of
// the workers' medians and p99s. For the Go modes a second line times
// the client's requests to the brokers by kind, end to end (Produce,
// TxnOffsetCommit, EndTxn, Metadata, ...; requests in -json): what the
// round trip is made of; request_count and request_bytes in -json total
// every request but fetches and its bytes both ways. A run of workers
// reports their CPU seconds (cpu_seconds: user and system, every instance
// and restart). -pipeline n sets onceflow's ring of
// transactional producers (processor.WithTransactionPipeline; 0: its
// default, 2).
//
// Scenarios (-scenario) are presets; explicit flags override them. The
// presets other than default and cpu run each mode once (-count 1):
//
//	default  the above
//	chat     50,000 records, 10 sessions, 10% transient faults, 1ms retry backoff;
//	         once from a backlog (throughput), once paced at the published
//	         14,027 records/s (latency); published figures printed beside ours
//	load     1,000,000 records, 1,000 sessions; add -rate N for a fixed offered load
//	pc       Confluent Parallel Consumer's workload: 10,000 records on one
//	         partition, handlers 0-5ms, by key count (1, 10, 100, 10,000) and
//	         ordering, beside its published times
//	io       1ms handlers, 50,000 records, every mode; the serial baselines
//	         are judged on the first 10,000 inputs (-baseline-messages)
//	cpu      20µs of CPU per record in every mode's handler (-handler-cpu),
//	         100,000 records, 1,000 sessions, 3 runs of each mode
//	churn    1,000,000 sessions of one record, 100ms idle eviction, in one
//	         worker process whose peak goroutines and VmHWM are reported
//	crash    3 subprocess workers, input produced at 5,000 records/s, one
//	         worker SIGKILLed and restarted under its instance ID every 3s;
//	         onceflow must stay exactly-once, alo-raw shows its duplicates
//	stateful 200,000 records, 1,000 sessions, onceflow-session with
//	         -stateful and 5% transient faults (1ms retry backoff)
//	scale    a sweep of partitions (input and output; -scale-partitions,
//	         default 6,60,300) × instances (subprocess workers;
//	         -scale-instances, default 1,3) for onceflow-session,
//	         onceflow-partition, franz-gts and alo-raw; at each point a
//	         backlog phase of 200,000 records (throughput) and a phase
//	         paced at -scale-rate (5,000 rec/s) for 10 s (latency, with
//	         the fair start). -scale-full sweeps 6,60,300,1000 × 1,3,6,12
//	         and adds kafka-streams. Points with more instances than
//	         partitions are skipped and named on stderr. A run that does
//	         not finish within -timeout or -stall is a DNF with how far
//	         it got, not a FAIL, when its output so far verified. After
//	         the tables, one table per point and mode: rec/s, p50 and
//	         p99 at the offered rate, commit round trip (median; Kafka
//	         Streams: mean), records per transaction, requests and KiB
//	         per commit (Go modes), peak RSS per instance, CPU seconds
//	         per million records per instance, time to first output.
//	         Each run's topics are deleted once it is verified.
//
// Before any topic is made, eosbench refuses (exit status 2) counts of
// zero or less, more -workers than -partitions, and a phase this machine
// cannot hold: its instances' memory (a JVM instance is counted at 1.25
// GiB, a Go worker at 160 MiB) beyond MemAvailable, more open files than
// this process may have, or, with brokers on this machine, more partition
// replicas at once than a broker's open-file limit (the same ulimit -n)
// or vm.max_map_count allow (every run's topics of a phase exist at once).
//
// -handler-cpu DURATION makes every mode's handler, the baselines' too,
// spend about that much CPU per record: SHA-256 rounds chained over the
// record's value, their number calibrated once per phase (printed on
// stderr) and the same for every run, so that the modes do equal work. It
// adds to -handler-latency, which sleeps.
//
// -stateful gives onceflow modes a state store (processor.WithStateStore,
// a temporary directory per instance; with -workers one per instance ID,
// kept across restarts so that a restarted worker restores the changelog's
// tail) and a handler that keeps a per-session counter in it: a record
// whose counter is not its position in its session is dead-lettered as
// "state out of step". After the run the changelog is read back
// read_committed and every session's final count checked against its
// number of inputs; a wrong count (state_violations in -json) or such a
// dead letter fails the run. alo-raw and franz-gts have no state and
// ignore the flag.
//
// A run fails early when no further input is accounted for during -stall
// (30s). -commit-metadata-bytes raises onceflow's bound on commit
// metadata (kfake enforces none; real brokers enforce
// offset.metadata.max.bytes).
//
// -client-log-level passes franz-go's own log of the onceflow modes to
// stderr at that level (processor.WithClientLogLevel; default warn), with
// -log-level at or below it: -client-log-level debug -log-level debug shows
// every produce response and its per-partition errors.
//
// Observability: -metrics-addr host:port serves Prometheus metrics on
// /metrics for the whole invocation (a fresh registry with the Go and
// process collectors; every in-process onceflow run registers into it,
// its series labelled by its consumer group; port 0 picks a free port,
// printed on stderr); -metrics-linger keeps serving that long after the
// runs so a scraper sees the final values. Metrics of -workers runs stay
// in the worker processes. An onceflow mode suffixed +obs runs with
// metrics and tracing on (every record sampled, spans batched to an
// exporter that drops them), +metrics or +tracing with one of them, and
// +guard with processor.WithPositionGuard; listing a mode and its twins
// alternately measures their cost side by side, reported as
// ratio_to_unobserved (medians of their runs, as the other ratios):
//
//	eosbench -modes onceflow-session,onceflow-session+obs -count 4
//
// -group-protocol consumer runs every mode under KIP-848's consumer group
// protocol (processor.WithGroupProtocol; franz-go's ServerSideBalancer for
// alo-raw and franz-gts); Kafka 4.0+ (kfake has it). Default classic.
//
// -brokers runs against real brokers; -json prints one JSON object instead
// of the tables: {"results":[...],"summary":[...]}, a result per run (its
// "run" numbers it among its mode's runs) and a summary per mode with
// "runs", "throughput_median", "throughput_min", "throughput_max",
// "ratio_to_franz_gts" (of medians; null when franz-gts did not run) and
// "exactly_once" (every run verified exactly once); -hist writes the latency
// histograms in HdrHistogram's percentile format; -plot FILE.svg draws, side
// by side, each mode's latency percentile curve (1/(1-p) on a log scale,
// its runs' histograms merged) and its throughput over its median run (in
// points of 300ms or more of inputs accounted for); -cpuprofile and
// -memprofile write pprof profiles. A live status line is drawn on stderr
// when it is a terminal. -version prints the module version that go
// install built ("(devel)" in a checkout) and the VCS revision if stamped.
// Run with -h for every flag.
package main
