package processor

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/internal/durations"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// metricsNamespace prefixes every metric of the processor; the franz-go
// client's own metrics (kprom) are under metricsNamespace + "_kafka".
const metricsNamespace = "onceflow"

// lagRefreshInterval is how often the end offsets of the input partitions
// are listed to keep the lag gauge current while fetching is paused.
const lagRefreshInterval = 5 * time.Second

// metrics holds the Prometheus collectors that are not derived from the
// Stats counters. A nil *metrics means metrics are off: every method is a
// no-op then, so the hot path pays one nil check.
//
// Counters that Stats also reports are CounterFuncs reading the same
// atomics at scrape time, so the two always agree and the hot path does no
// extra work for them.
type metrics struct {
	commitLatency  prometheus.Histogram
	commitInterval prometheus.Histogram
	commitFloor    prometheus.Gauge
	budget         prometheus.Gauge
	commitStage    *prometheus.HistogramVec
	txnsInFlight   prometheus.Gauge
	lastCommit     time.Time // the previous commit's start; loop-owned
	inFlight       *prometheus.GaugeVec
	buffered       *prometheus.GaugeVec
	oldestAge      *prometheus.GaugeVec
	lag            *prometheus.GaugeVec
	kprom          *kprom.Metrics
}

// partLabels are the variable labels of the per-partition gauges.
var partLabels = []string{"topic", "partition"}

func newMetrics(reg prometheus.Registerer, cfg *config, s *counters) *metrics {
	if reg == nil {
		return nil
	}
	constLabels := prometheus.Labels{"group": cfg.group, "instance": cfg.instanceID}
	m := loopMetrics(constLabels)
	m.kprom = kprom.NewMetrics(metricsNamespace+"_kafka", kprom.Registerer(reg), kprom.WithStaticLabel(constLabels))
	cs := []prometheus.Collector{
		m.commitLatency, m.commitInterval, m.commitFloor, m.budget, m.commitStage, m.txnsInFlight, m.inFlight, m.buffered, m.oldestAge, m.lag,
	}
	for _, c := range append(cs, statsMetrics(constLabels, s)...) {
		reg.MustRegister(c)
	}
	return m
}

// loopMetrics are the metrics the loop sets.
func loopMetrics(constLabels prometheus.Labels) *metrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metricsNamespace, Name: name, Help: help, ConstLabels: constLabels}
	}
	seconds := func(name, help string) prometheus.HistogramOpts {
		o := opts(name, help)
		return prometheus.HistogramOpts{Namespace: o.Namespace, Name: o.Name, Help: o.Help, ConstLabels: o.ConstLabels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)} // 1ms .. 16s
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts(opts(name, help)))
	}
	perPartition := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts(opts(name, help)), partLabels)
	}
	return &metrics{
		commitLatency: prometheus.NewHistogram(seconds("commit_duration_seconds",
			"Time to commit one transaction (offsets, outputs and end of transaction).")),
		commitInterval: prometheus.NewHistogram(seconds("commit_interval_seconds",
			"Time from one commit's start to the next's: scheduled by load, at most WithCommitInterval after the previous commit ended.")),
		commitFloor: gauge("commit_floor_seconds",
			"The shortest time from a commit's end to the next commit's start as the load sets it now (WithMinCommitInterval up to WithCommitInterval)."),
		budget: gauge("transaction_budget_bytes",
			"The bytes of records a transaction takes in before it commits, as the pace of its ends sets it now (halved after an end slower than a fifth of the transaction timeout)."),
		commitStage: prometheus.NewHistogramVec(seconds("commit_stage_duration_seconds",
			"Time of each stage of a transaction's end: stage=flush (its records acknowledged), stage=commit (the offset commit and EndTxn)."), []string{"stage"}),
		txnsInFlight: gauge("transactions_in_flight",
			"Transactions begun and not ended: the open one, once it holds work, and one ending (WithTransactionPipeline)."),
		inFlight: perPartition("inflight_records",
			"Fetched records of the partition that are not finished yet."),
		buffered: perPartition("buffered_records",
			"Records held for the partition (unfinished, or finished above the lowest unfinished one); fetching pauses at WithMaxBuffered."),
		oldestAge: perPartition("oldest_unfinished_age_seconds",
			"Age since fetch of the partition's lowest unfinished record (0 when none); it holds the partition's commit point."),
		lag: perPartition("consumer_lag_records",
			"High watermark of the input partition minus the next offset to fetch."),
	}
}

// statsMetrics are the metrics that read the counters behind Stats when
// scraped.
func statsMetrics(constLabels prometheus.Labels, s *counters) []prometheus.Collector {
	counter := func(name, help string, v func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: name, Help: help, ConstLabels: constLabels,
		}, func() float64 { return float64(v()) })
	}
	cs := []prometheus.Collector{
		counter("records_consumed_total", "Records taken from fetches, not counting refetches after a rewind (Stats.Consumed).", s.consumed.Load),
		counter("records_skipped_done_total", "Fetched records skipped because a committed transaction already finished them (Stats.SkippedDone).", s.skipped.Load),
		counter("records_produced_total", "Output records in committed transactions (Stats.Outputs).", s.outputs.Load),
		counter("retries_total", "Handler retries after transient errors (Stats.Retries).", s.retries.Load),
		counter("transactions_committed_total", "Committed transactions (Stats.Commits).", s.commits.Count),
		counter("fenced_total", "Times this instance was fenced by a newer one with the same instance ID (Stats.Fenced).", s.fenced.Load),
		counter("client_rebuilds_total", "Transactional clients rebuilt after timeouts, fencing of the producer epoch or unknown commit outcomes (Stats.Rebuilds).", s.rebuilds.Load),
		counter("rebalances_total", "Group rebalances that changed or confirmed this instance's assignment (Stats.Rebalances).", s.rebalances.Load),
		counter("records_reprocessed_total", "Finished records whose work an aborted transaction threw away, to be handled again (Stats.Reprocessed).", s.reprocessed.Load),
		counter("state_restored_records_total", "Changelog records replayed into the state store (Stats.StateRestored).", s.restored.Load),
		counter("duplicates_skipped_total", "Records skipped in committed transactions because their event ID was already processed (WithDedupe; Stats.DuplicatesSkipped).", s.dups.Load),
		counter("position_regressions_total", "Partitions resumed from the position log because the group served an older position (WithPositionGuard; Stats.PositionRegressions).", s.positionRegressions.Load),
		counter("dedupe_restored_marks_total", "Dedupe changelog records replayed into the dedupe store (Stats.MarksRestored).", s.marksRestored.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "active_sessions", ConstLabels: constLabels,
			Help: "Sessions with records queued, running or backing off (Stats.ActiveSessions).",
		}, func() float64 { return float64(s.activeSessions.Load()) }),
	}
	// One counter per reason, under one name: the reasons are fixed, so
	// they are CounterFuncs like the rest.
	for i, reason := range dlqReasons {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "records_dead_lettered_total",
			Help:        "Dead-letter records in committed transactions, by reason (their sum is Stats.DeadLettered).",
			ConstLabels: withReason(constLabels, reason),
		}, func() float64 { return float64(s.dlqBy[i].Load()) }))
	}
	for i, reason := range abortReasons {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "transactions_aborted_total",
			Help:        "Aborted transactions, by reason (their sum is Stats.Aborts; see Stats.AbortsBy).",
			ConstLabels: withReason(constLabels, reason),
		}, func() float64 { return float64(s.abortsBy[i].Load()) }))
	}
	return cs
}

// withReason is labels with a reason label added.
func withReason(labels prometheus.Labels, reason string) prometheus.Labels {
	out := maps.Clone(labels)
	out["reason"] = reason
	return out
}

// observeCommitStart records the time since the previous commit started.
func (m *metrics) observeCommitStart(now time.Time) {
	if m == nil {
		return
	}
	if !m.lastCommit.IsZero() {
		m.commitInterval.Observe(now.Sub(m.lastCommit).Seconds())
	}
	m.lastCommit = now
}

func (m *metrics) setCommitFloor(d time.Duration) {
	if m != nil {
		m.commitFloor.Set(d.Seconds())
	}
}

func (m *metrics) setTxnBudget(bytes int64) {
	if m != nil {
		m.budget.Set(float64(bytes))
	}
}

func (m *metrics) observeCommit(d time.Duration) {
	if m != nil {
		m.commitLatency.Observe(d.Seconds())
	}
}

// observeStage records one stage of a transaction's end.
func (m *metrics) observeStage(stage string, d time.Duration) {
	if m != nil {
		m.commitStage.WithLabelValues(stage).Observe(d.Seconds())
	}
}

// setInFlight sets the transactions in flight (committer.inFlight).
func (m *metrics) setInFlight(n int) {
	if m != nil {
		m.txnsInFlight.Set(float64(n))
	}
}

// publish sets the per-partition gauges from the loop's state at now.
//
// Lag is the partition's high watermark minus the next offset to fetch.
// Fetch responses carry the high watermark (kgo.FetchPartition), but a
// paused partition gets no fetches, and a backlog is exactly when fetching
// pauses: so the loop also raises it to the end offsets a goroutine lists
// every lagRefreshInterval (endOffsets). The gauge is then stale by at
// most that interval, whether fetching runs or not. Transaction markers
// occupy offsets, so with transactional producers the gauge may read 1 at
// rest rather than 0.
func (m *metrics) publish(all map[tp]*partition, now time.Time) {
	if m == nil {
		return
	}
	for _, p := range all {
		lv := []string{p.topic, strconv.Itoa(int(p.id))}
		m.inFlight.WithLabelValues(lv...).Set(float64(p.unfinished()))
		m.buffered.WithLabelValues(lv...).Set(float64(p.buffered()))
		age := 0.0
		if len(p.pending) > 0 {
			age = now.Sub(time.Unix(0, p.pending[0].fetched)).Seconds()
		}
		m.oldestAge.WithLabelValues(lv...).Set(age)
		if p.hwm >= 0 && p.next >= 0 {
			m.lag.WithLabelValues(lv...).Set(float64(max(p.hwm-p.next, 0)))
		}
	}
}

// unpublish drops a partition's gauges when it is revoked.
func (m *metrics) unpublish(k tp) {
	if m == nil {
		return
	}
	lv := []string{k.topic, strconv.Itoa(int(k.partition))}
	m.inFlight.DeleteLabelValues(lv...)
	m.buffered.DeleteLabelValues(lv...)
	m.oldestAge.DeleteLabelValues(lv...)
	m.lag.DeleteLabelValues(lv...)
}

// tracerName is the instrumentation scope of the processor's spans.
const tracerName = "github.com/onceflow/onceflow/processor"

// Span names.
const (
	spanHandle = "onceflow.handle"
	spanCommit = "onceflow.commit"
)

// propagator carries W3C trace context (traceparent, tracestate) in record
// headers.
var propagator = propagation.TraceContext{}

// headerCarrier adapts record headers to propagation.TextMapCarrier. Set
// replaces a header of the same key, so an output that copied its input's
// headers carries the handle span, not the input's.
type headerCarrier struct{ hs *[]kgo.RecordHeader }

func (c headerCarrier) Get(key string) string {
	for _, h := range *c.hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	for i, h := range *c.hs {
		if h.Key == key {
			(*c.hs)[i].Value = []byte(value)
			return
		}
	}
	*c.hs = append(*c.hs, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(*c.hs))
	for i, h := range *c.hs {
		keys[i] = h.Key
	}
	return keys
}

// startHandle starts the handle span of it, as a child of the context in
// the input record's headers. The loop of the record's attempts runs under
// it; retries are span events.
func startHandle(ctx context.Context, tr trace.Tracer, it *item) (context.Context, trace.Span) {
	r := it.rec
	ctx = propagator.Extract(ctx, headerCarrier{&r.Headers})
	return tr.Start(ctx, spanHandle, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.destination.name", r.Topic),
		attribute.Int("messaging.destination.partition.id", int(r.Partition)),
		attribute.Int64("messaging.kafka.offset", r.Offset),
	))
}

// endHandle records the outcome, injects the span's context into the
// outputs and the dead-letter record and ends the span.
func endHandle(ctx context.Context, span trace.Span, it *item, reason string, err error) {
	span.SetAttributes(attribute.Int("onceflow.attempt", int(it.attempts)))
	if reason != "" {
		span.SetAttributes(attribute.String("onceflow.dlq.reason", reason))
		span.SetStatus(codes.Error, reason)
		if err != nil {
			span.RecordError(err)
		}
	}
	for _, r := range it.outputs {
		propagator.Inject(ctx, headerCarrier{&r.Headers})
	}
	if it.dlq != nil {
		propagator.Inject(ctx, headerCarrier{&it.dlq.Headers})
	}
	span.End()
}

// abandonHandle ends the span of a record that went stale (revoked or
// rewound), was dead-lettered as stuck by the loop, or was cut short by
// shutdown: it produced nothing from this attempt.
func abandonHandle(span trace.Span, it *item) {
	span.SetAttributes(attribute.Int("onceflow.attempt", int(it.attempts)), attribute.Bool("onceflow.abandoned", true))
	span.End()
}

// retryEvent records a failed attempt that will be retried.
func retryEvent(span trace.Span, attempt int, err error) {
	span.AddEvent("retry", trace.WithAttributes(
		attribute.Int("onceflow.attempt", attempt),
		attribute.String("exception.message", err.Error()),
	))
}

// startCommitSpan starts the span of the commit of a transaction with
// counts c, holding work of n input partitions; without a tracer, none.
func startCommitSpan(ctx context.Context, tracer trace.Tracer, c txnCounts, n int) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, nil
	}
	return tracer.Start(ctx, spanCommit, trace.WithAttributes(
		attribute.Int64("onceflow.outputs", c.outputs),
		attribute.Int64("onceflow.dead_letters", c.deadLetters),
		attribute.Int("onceflow.partitions", n),
	))
}

// endCommit records the outcome and, for a committed transaction, the input
// partitions whose offsets it committed ("topic/partition"), which tells
// how long each partition went between commits.
func endCommit(span trace.Span, committed bool, sent map[tp]bool, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Bool("onceflow.committed", committed))
	if committed && span.IsRecording() {
		parts := make([]string, 0, len(sent))
		for k := range sent {
			parts = append(parts, k.topic+"/"+strconv.Itoa(int(k.partition)))
		}
		slices.Sort(parts)
		span.SetAttributes(attribute.StringSlice("onceflow.committed_partitions", parts))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "commit failed")
	} else if !committed {
		span.SetStatus(codes.Error, "aborted")
	}
	span.End()
}

// endOffsets are the input partitions' end offsets as a goroutine lists
// them (refresh), for the lag gauge: a paused partition gets no fetches,
// and so no high watermark, exactly when it lags (metrics.publish).
type endOffsets struct {
	mu     sync.Mutex
	listed map[tp]int64 // since the last raise
}

func newEndOffsets() *endOffsets { return &endOffsets{listed: make(map[tp]int64)} }

// refresh lists the inputs' end offsets every interval
// (lagRefreshInterval) until ctx is done. It runs on its own goroutine,
// off the loop.
func (e *endOffsets) refresh(ctx context.Context, cl *kgo.Client, inputs []string, interval time.Duration, log *slog.Logger) {
	adm := kadm.NewClient(cl)
	every(ctx, interval, func() bool {
		rctx, cancel := context.WithTimeout(ctx, interval)
		ends, err := adm.ListEndOffsets(rctx, inputs...)
		cancel()
		if err != nil {
			log.Debug("listing end offsets for the lag gauge failed", "err", err)
			return true
		}
		e.mu.Lock()
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				k := tp{o.Topic, o.Partition}
				e.listed[k] = max(e.listed[k], o.Offset)
			}
		})
		e.mu.Unlock()
		return true
	})
}

// raise raises the partitions' high watermarks to the end offsets listed
// since the last call. The loop calls it.
func (e *endOffsets) raise(all map[tp]*partition) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, end := range e.listed {
		if p := all[k]; p != nil {
			p.hwm = max(p.hwm, end)
		}
	}
	clear(e.listed)
}

// jobAttrsHandler adds the job's coordinates (group, instance, brokers and
// topics) to every record at slog.LevelWarn and above, franz-go's own
// included: a warning or an error must say where to look without the
// reader knowing which process wrote it, while Info and Debug lines stay
// as lean as their call sites make them. Call sites add what only they
// know: a partition, an offset, the record's topic.
type jobAttrsHandler struct {
	next  slog.Handler
	attrs []slog.Attr
}

// withJobAttrs wraps l so that its warnings and errors name the job of c.
func withJobAttrs(l *slog.Logger, c *config) *slog.Logger {
	attrs := []slog.Attr{
		slog.String("group", c.group),
		slog.String("instance", c.instanceID),
		slog.String("brokers", strings.Join(c.brokers, ",")),
		slog.String("inputs", strings.Join(c.inputs, ",")),
	}
	if c.output != "" {
		attrs = append(attrs, slog.String("output", c.output))
	}
	if c.dlq != "" {
		attrs = append(attrs, slog.String("dlq", c.dlq))
	}
	return slog.New(&jobAttrsHandler{next: l.Handler(), attrs: attrs})
}

func (h *jobAttrsHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *jobAttrsHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && len(h.attrs) > 0 {
		attrs := h.attrs
		r.Attrs(func(a slog.Attr) bool {
			attrs = without(attrs, a.Key) // the line's own value wins
			return true
		})
		r = r.Clone() // the caller's record may share its attribute array
		r.AddAttrs(attrs...)
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs leaves out of the job's attributes those the logger now
// carries itself (a user's logger.With("instance", ...)): one key, once.
func (h *jobAttrsHandler) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := h.attrs
	for _, a := range as {
		attrs = without(attrs, a.Key)
	}
	return &jobAttrsHandler{next: h.next.WithAttrs(as), attrs: attrs}
}

// without returns attrs without the one of key, copied if it was there.
func without(attrs []slog.Attr, key string) []slog.Attr {
	i := slices.IndexFunc(attrs, func(a slog.Attr) bool { return a.Key == key })
	if i < 0 {
		return attrs
	}
	return slices.Delete(slices.Clone(attrs), i, i+1)
}

func (h *jobAttrsHandler) WithGroup(name string) slog.Handler {
	return &jobAttrsHandler{next: h.next.WithGroup(name), attrs: h.attrs}
}

type counters struct {
	consumed, skipped, outputs, dlq, retries, rebuilds, reprocessed, fenced, restored, rebalances atomic.Int64
	dups, marksRestored, positionRegressions, activeSessions                                      atomic.Int64
	dlqBy                                                                                         [len(dlqReasons)]atomic.Int64
	abortsBy                                                                                      [len(abortReasons)]atomic.Int64

	commits durations.Recorder // each committed transaction's round trip: count, total and quantiles
}

// txnCounts are what a transaction adds to Stats when it commits.
type txnCounts struct {
	outputs, deadLetters, dups int64
	deadLettersBy              [len(dlqReasons)]int64
}

// observers are where a Run reports what it does: the counters behind
// Stats, the metrics, the tracer and the health.
type observers struct {
	stats  *counters
	m      *metrics     // nil without WithMetrics
	tracer trace.Tracer // nil without WithTracerProvider
	health *healthState
}

// healthState is what Run and its loop report for Processor.Health:
// atomic values that a probe reads without waiting for either.
type healthState struct {
	phase     atomic.Int32 // a healthPhase
	reason    atomic.Pointer[string]
	turned    atomic.Int64 // Unix ns of the loop's last turn (0: none)
	committed atomic.Int64 // Unix ns of the last commit (0: none)
	joined    atomic.Bool  // the member holds a generation or epoch, not lost since
	claimed   atomic.Bool  // the instance ID's transactional ID is this process's
	assigned  atomic.Int32
	restoring atomic.Int32
	lostEpoch atomic.Int32 // the epoch the member lost its partitions in (-1: none)
	oldest    atomic.Pointer[oldestRecord]
}

// healthPhase is where Run is.
type healthPhase int32

const (
	phaseNotStarted healthPhase = iota
	phaseStarting               // the start checks
	phaseJoining                // a client built, joining and claiming
	phaseRunning                // the loop runs
	phaseRebuilding             // a client failed; the next is being built
	phaseStopping               // Run's ctx ended: the last commit
	phaseStopped                // Run returned nil
	phaseFailed                 // Run returned an error
)

var phaseNames = [...]string{"not started", "starting", "joining", "running", "rebuilding", "stopping", "stopped", "failed"}

// oldestRecord is the oldest unfinished record of the assigned partitions.
type oldestRecord struct {
	topic     string
	partition int32
	offset    int64
	since     time.Time // when it became its partition's lowest unfinished record
}

func newHealthState() *healthState {
	h := &healthState{}
	h.lostEpoch.Store(-1)
	return h
}

// enter sets the phase and why (for a failure, a rebuild: the error).
func (h *healthState) enter(p healthPhase, reason string) {
	h.phase.Store(int32(p))
	h.reason.Store(&reason)
	if p != phaseRunning && p != phaseStopping {
		h.joined.Store(false)
	}
}

// lost notes that the member lost its partitions in epoch: it is not
// joined until it holds another.
func (h *healthState) lost(epoch int32) {
	h.lostEpoch.Store(epoch)
	h.joined.Store(false)
}

// member notes the member's current epoch (GroupMetadata; 0 or less: none).
func (h *healthState) member(epoch int32) {
	lost := h.lostEpoch.Load()
	if epoch > 0 && epoch != lost && lost >= 0 {
		h.lostEpoch.Store(-1)
		lost = -1
	}
	h.joined.Store(epoch > 0 && lost < 0)
}

// progress notes the assigned partitions, those restoring, and the
// oldest unfinished record of all (nil: none).
func (h *healthState) progress(assigned, restoring int, oldest *oldestRecord) {
	h.assigned.Store(int32(assigned))
	h.restoring.Store(int32(restoring))
	h.oldest.Store(oldest)
}
