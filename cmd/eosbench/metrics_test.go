package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// scrapedCounters are the processor's counters the test follows.
var scrapedCounters = []string{
	"onceflow_records_consumed_total",
	"onceflow_records_produced_total",
	"onceflow_records_dead_lettered_total", // summed over reasons
	"onceflow_retries_total",
	"onceflow_transactions_committed_total",
	"onceflow_transactions_aborted_total",
	"onceflow_fenced_total",
}

// scrape GETs /metrics and sums each family's samples over their labels.
func scrape(t *testing.T, cl *http.Client, url string) map[string]float64 {
	t.Helper()
	resp, err := cl.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[name] += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] += m.GetGauge().GetValue()
			default:
				out[name]++ // present
			}
		}
	}
	return out
}

// TestMetricsEndpoint runs eosbench with -metrics-addr, paced so that the
// run lasts a few seconds, and scrapes /metrics throughout: the
// processor's counters only grow, and once the run is over they agree
// with what the verifier read back from the topics.
func TestMetricsEndpoint(t *testing.T) {
	c := kafkatest.New(t)
	const messages = 10_000
	var stdout, stderr kafkatest.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := make(chan int, 1)
	go func() {
		status <- run(ctx, []string{
			"-brokers", strings.Join(c.Brokers, ","),
			"-messages", "10000", "-sessions", "100", "-rate", "5000",
			"-modes", "onceflow-session", "-count", "1",
			"-fault-rate", "0.05", "-retry-initial", "1ms",
			"-metrics-addr", "127.0.0.1:0", "-metrics-linger", "2m",
			"-timeout", "90s", "-json",
		}, strings.NewReader(""), &stdout, &stderr)
	}()

	addrRE := regexp.MustCompile(`serving metrics on (http://\S+/metrics)`)
	var url string
	require.Eventually(t, func() bool {
		m := addrRE.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, 30*time.Second, 10*time.Millisecond, "no metrics address on stderr: %s", stderr.String())
	// No keep-alive: goleak wants no client connection left behind.
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

	// Scrape until the results are printed (the run is over, the
	// pipeline stopped); the server lingers for the final scrape.
	var snaps []map[string]float64
	sawClient := false
	for {
		if out := stdout.String(); out != "" && json.Valid([]byte(out)) {
			break
		}
		select {
		case st := <-status:
			t.Fatalf("eosbench exited with %d before printing results: %s", st, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		s := scrape(t, cl, url)
		require.Contains(t, s, "go_goroutines", "the Go collector is registered")
		if _, ok := s["onceflow_records_consumed_total"]; ok {
			snaps = append(snaps, s)
			_, k := s["onceflow_kafka_buffered_produce_records_total"]
			sawClient = sawClient || k
		}
	}
	final := scrape(t, cl, url)
	cancel() // ends the linger
	require.Equal(t, 0, <-status, "stderr: %s", stderr.String())

	rs := decode(t, []byte(stdout.String()))
	require.Len(t, rs, 1)
	r := rs[0]
	defer func() {
		if t.Failed() {
			t.Logf("counters %+v\nfinal scrape %v\nstderr: %s", r.Counters, final, stderr.String())
		}
	}()
	require.Equal(t, bench.VerdictPass, r.Verdict, r.Failure)
	require.Equal(t, messages, r.Outputs+r.DLQ)

	// The final counters agree with the verifier's read-back and the
	// processor's Stats.
	require.Equal(t, float64(messages), final["onceflow_records_consumed_total"], "inputs")
	require.Equal(t, float64(r.Outputs), final["onceflow_records_produced_total"], "outputs")
	require.Equal(t, float64(r.DLQ), final["onceflow_records_dead_lettered_total"], "dead letters")
	require.Equal(t, float64(r.Counters.Commits), final["onceflow_transactions_committed_total"])
	require.Positive(t, final["onceflow_transactions_committed_total"])
	require.Equal(t, float64(r.Counters.Retries), final["onceflow_retries_total"])
	require.Positive(t, final["onceflow_retries_total"], "faults were injected")
	require.Zero(t, final["onceflow_fenced_total"])

	// Mid-run scrapes: at least one saw the run under way, and every
	// counter only grew towards its final value.
	require.True(t, sawClient, "the client's own (kprom) metrics were served during the run")
	mid := 0
	for _, s := range snaps {
		if s["onceflow_records_produced_total"] < final["onceflow_records_produced_total"] {
			mid++
		}
	}
	t.Logf("%d scrapes with the processor registered, %d of them before its final count", len(snaps), mid)
	require.Positive(t, mid, "no scrape during the run (of %d)", len(snaps))
	for _, name := range scrapedCounters {
		prev := 0.0
		for i, s := range snaps {
			v := s[name]
			require.GreaterOrEqual(t, v, prev, "%s went down at scrape %d", name, i)
			require.LessOrEqual(t, v, final[name], "%s above its final value at scrape %d", name, i)
			prev = v
		}
	}
}

// TestObservedMode: an observed mode (+obs) runs the same pipeline with
// metrics and tracing on; it stays exactly once, its spans reach the
// exporter (sampling is on), and its throughput is compared with its
// unobserved twin's.
func TestObservedMode(t *testing.T) {
	c := kafkatest.New(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := run(ctx, []string{
		"-brokers", strings.Join(c.Brokers, ","),
		"-messages", "3000", "-sessions", "100",
		"-modes", "onceflow-session,onceflow+obs,onceflow-session+metrics", "-count", "1",
		"-fault-rate", "0.05", "-retry-initial", "1ms",
		"-timeout", "90s", "-json",
	}, strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, status, "stderr: %s", stderr.String())
	rs := decode(t, stdout.Bytes())
	require.Len(t, rs, 3)
	plain, obs, met := rs[0], rs[1], rs[2]
	require.Equal(t, bench.ModeSession, plain.Mode)
	require.Equal(t, bench.ModeSession+bench.ObserveSuffix, obs.Mode, "onceflow+obs resolves to the ordering's mode")
	for _, r := range rs {
		require.Equal(t, bench.VerdictPass, r.Verdict, r.Failure)
		require.Equal(t, 3000, r.Outputs)
	}
	require.Zero(t, plain.Counters.Spans, "no tracing without +obs")
	require.Zero(t, met.Counters.Spans, "no tracing with +metrics")
	require.NotNil(t, met.RatioToUnobserved)
	// One handle span per record at least, plus commits; the batcher may
	// drop some when its queue is full, so only presence is certain.
	require.Positive(t, obs.Counters.Spans)
	t.Logf("observed run exported %d spans for %d records", obs.Counters.Spans, obs.Messages)
	require.Nil(t, plain.RatioToUnobserved)
	require.NotNil(t, obs.RatioToUnobserved)
	require.InDelta(t, obs.Throughput/plain.Throughput, *obs.RatioToUnobserved, 1e-9)
	require.Contains(t, stdout.String(), `"ratio_to_unobserved"`)
}
