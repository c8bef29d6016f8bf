package dashboards

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/processor"
)

// Exported is the set of series names a scrape showed: a counter's or a
// gauge's name, a histogram's name_bucket, name_sum and name_count, a
// summary's name, name_sum and name_count.
type Exported map[string]bool

// Missing returns the names in used that e lacks, sorted and without
// repeats.
func (e Exported) Missing(used []string) []string {
	var out []string
	for _, n := range used {
		if !e[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// add records the series names of a scraped family.
func (e Exported) add(mf *dto.MetricFamily) {
	name := mf.GetName()
	switch mf.GetType() {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		e[name+"_bucket"], e[name+"_sum"], e[name+"_count"] = true, true, true
	case dto.MetricType_SUMMARY:
		e[name], e[name+"_sum"], e[name+"_count"] = true, true, true
	default:
		e[name] = true
	}
}

// The job's records: one goes to the dead-letter topic, one fails once
// and is retried, the rest are copied.
const (
	jobRecords = 12
	poison     = "poison"
	flaky      = "flaky"
)

// ScrapeRun runs a small processor job (an input of two partitions, an
// output and a dead-letter topic, a record dead-lettered and one retried)
// on an in-process cluster, with its metrics on a registry of its own
// served as /metrics over HTTP, and scrapes that until every name in want
// has appeared and the job has committed its input, or ctx ends. It
// returns what the last scrape showed: series such as the per-partition
// gauges appear only once the job has partitions, so a name still absent
// when ctx ends is one the processor does not export.
func ScrapeRun(ctx context.Context, want []string) (Exported, error) {
	const in, out, dlq = "requests", "events", "requests-dlq"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, in, out, dlq))
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(in))
	if err != nil {
		return nil, err
	}
	var recs []*kgo.Record
	for i := range jobRecords {
		v := fmt.Sprintf("r%d", i)
		switch i {
		case 3:
			v = poison
		case 7:
			v = flaky
		}
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "s%d", i%4), Value: []byte(v)})
	}
	err = cl.ProduceSync(ctx, recs...).FirstErr()
	cl.Close()
	if err != nil {
		return nil, fmt.Errorf("producing the job's input: %w", err)
	}

	var failed sync.Once
	reg := prometheus.NewRegistry()
	p, err := processor.New(
		processor.WithBrokers(brokers...),
		processor.WithGroup("dashboards"),
		processor.WithInstanceID("scrape-0"),
		processor.WithInputTopics(in),
		processor.WithOutputTopic(out),
		processor.WithDLQTopic(dlq),
		processor.WithMetrics(reg),
		processor.WithLogger(slog.New(slog.DiscardHandler)),
		processor.WithHandler(func(ctx context.Context, r *kgo.Record, em processor.Emitter) error {
			switch string(r.Value) {
			case poison:
				return processor.Permanent(errors.New("a poison record"))
			case flaky:
				var retry error
				failed.Do(func() { retry = errors.New("fails once") })
				if retry != nil {
					return retry
				}
			}
			em.Emit(&kgo.Record{Value: r.Value})
			return nil
		}),
	)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() { stop(); <-done }()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := scrape(ctx, srv.URL+"/metrics")
		if err != nil {
			return nil, err
		}
		s := p.Stats()
		if s.Consumed >= jobRecords && s.Outputs+s.DeadLettered >= jobRecords && len(got.Missing(want)) == 0 {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, nil
		case err := <-done:
			done <- err // for the deferred wait
			return nil, fmt.Errorf("the job stopped before its metrics could be scraped: %v", err)
		case <-tick.C:
		}
	}
}

// scrape reads url's exposition as Prometheus would.
func scrape(ctx context.Context, url string) (Exported, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping /metrics: %s", resp.Status)
	}
	e := Exported{}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return e, nil
			}
			return nil, fmt.Errorf("parsing /metrics: %w", err)
		}
		e.add(&mf)
	}
}
