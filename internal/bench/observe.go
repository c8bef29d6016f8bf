package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/onceflow/onceflow/processor"
)

// scrapeInterval is how often an observed mode's private registry is
// gathered and encoded, as a Prometheus server would scrape it. Real
// scrapes come every 15-60s: once a second overstates their cost.
const scrapeInterval = time.Second

// observability is an onceflow pipeline's instrumentation. Metrics go to
// Job.Metrics when eosbench serves them (-metrics-addr). An observed mode
// (ObserveSuffix and the like) runs as a production deployment would:
// metrics into a private registry scraped every scrapeInterval (when none
// is served), tracing with every record sampled and spans batched to an
// exporter that drops them, so that the cost is the processor's and the
// SDK's, not a collector's.
type observability struct {
	opts   []processor.Opt
	tp     *sdktrace.TracerProvider
	gather prometheus.Gatherer // private registry to scrape; nil when served or off
	spans  *atomic.Int64       // spans the exporter was given
}

func newObservability(job Job) *observability {
	o := &observability{spans: new(atomic.Int64)}
	reg := job.Metrics
	if job.Mode.metricsOn() && reg == nil {
		r := prometheus.NewRegistry()
		reg, o.gather = r, r
	}
	if job.Mode.tracingOn() {
		o.tp = sdktrace.NewTracerProvider(
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(discardExporter{o.spans}),
		)
		o.opts = append(o.opts, processor.WithTracerProvider(o.tp))
	}
	if reg != nil {
		o.opts = append(o.opts, processor.WithMetrics(reg))
	}
	return o
}

// run runs the processor (fn) with the scrapes beside it, and flushes the
// tracer provider after it.
func (o *observability) run(ctx context.Context, fn func(context.Context) error) error {
	var wg sync.WaitGroup
	sctx, stopScrapes := context.WithCancel(ctx)
	if o.gather != nil {
		wg.Go(func() { scrapeLoop(sctx, o.gather) })
	}
	err := fn(ctx)
	stopScrapes()
	wg.Wait()
	if o.tp != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := o.tp.Shutdown(sctx); serr != nil && err == nil {
			err = fmt.Errorf("bench: shutting the tracer provider down: %w", serr)
		}
	}
	return err
}

// scrapeLoop gathers g and encodes it in the text format, as promhttp
// would for a scrape, until ctx is done.
func scrapeLoop(ctx context.Context, g prometheus.Gatherer) {
	t := time.NewTicker(scrapeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mfs, _ := g.Gather()
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			_ = enc.Encode(mf)
		}
	}
}

// discardExporter counts the spans it is given and drops them. The
// batcher itself drops spans when its queue is full, as it would in
// production: the count says how many got through.
type discardExporter struct{ n *atomic.Int64 }

func (e discardExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return nil
}

func (discardExporter) Shutdown(context.Context) error { return nil }
