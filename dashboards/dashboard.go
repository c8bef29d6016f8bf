package dashboards

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// sel selects the series of the groups and instances picked on the
// dashboard.
const sel = `{group=~"$group", instance=~"$instance"}`

// query is one line of a panel; unit, if set, is its own, on the right
// axis (see right).
type query struct {
	expr, legend, unit string
}

// right puts q on the right axis in unit: a panel with two kinds of line.
func right(q query, unit string) query {
	q.unit = unit
	return q
}

// panel is one time series panel.
type panel struct {
	title, description, unit string
	queries                  []query
}

// row is a titled row of panels.
type row struct {
	title  string
	panels []panel
}

// rate is the per-second rate of a counter summed by the labels given.
func rate(by, metric string) string {
	return fmt.Sprintf("sum by (%s) (rate(%s%s[$__rate_interval]))", by, metric, sel)
}

// p is a quantile of a histogram's observations, by the labels given.
func p(q, by, metric string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s_bucket%s[$__rate_interval])))", q, by+", le", metric, sel)
}

// layout is the dashboard: what the issue asks for (throughput, lag while
// paused, commit round trip and size, aborts and dead letters by reason,
// retries, sessions in flight, ring occupancy), row by row. The metrics
// are described in docs/operations.md#metrics.
func layout() []row {
	return []row{
		{"Throughput and lag", []panel{
			{"Throughput", "Input records taken, output records committed, records skipped as already done (after a restart or rebalance) and as duplicates (WithDedupe), per second.", "cps", []query{
				{rate("group", "onceflow_records_consumed_total"), "{{group}} consumed", ""},
				{rate("group", "onceflow_records_produced_total"), "{{group}} produced", ""},
				{rate("group", "onceflow_records_skipped_done_total"), "{{group}} skipped: done", ""},
				{rate("group", "onceflow_duplicates_skipped_total"), "{{group}} skipped: duplicate", ""},
			}},
			{"Lag, also while paused", "High watermark minus the next offset to fetch, by input topic. Fetching pauses while the buffer is full, and the lag is then refreshed by listing end offsets every 5 s, so it is never staler than that. With transactional producers upstream it may rest at 1 per partition (the markers).", "short", []query{
				{"sum by (group, topic) (onceflow_consumer_lag_records" + sel + ")", "{{group}} {{topic}}", ""},
			}},
			{"Records held", "Records held per instance: fetched and not finished (in flight), and all held (unfinished, or finished above the lowest unfinished one). The total is bounded by WithMaxBuffered; a partition past twice its share pauses.", "short", []query{
				{"sum by (group, instance) (onceflow_inflight_records" + sel + ")", "{{instance}} in flight", ""},
				{"sum by (group, instance) (onceflow_buffered_records" + sel + ")", "{{instance}} buffered", ""},
			}},
			{"Oldest unfinished record", "Age since fetch of each partition's lowest unfinished record: it holds the partition's commit point, and what came after it is redone on a failover. Compare with WithStuckTimeout.", "s", []query{
				{"max by (group, topic, partition) (onceflow_oldest_unfinished_age_seconds" + sel + ")", "{{topic}}/{{partition}}", ""},
			}},
		}},
		{"Commits", []panel{
			{"Commit round trip", "A transaction's offset commit and EndTxn (commit_duration), and its end by stage: records acknowledged (flush), offset commit and EndTxn (commit). Keep the p99 well below the transaction timeout (10 s by default).", "s", []query{
				{p("0.5", "group", "onceflow_commit_duration_seconds"), "{{group}} p50", ""},
				{p("0.99", "group", "onceflow_commit_duration_seconds"), "{{group}} p99", ""},
				{p("0.99", "group, stage", "onceflow_commit_stage_duration_seconds"), "{{group}} p99 {{stage}}", ""},
			}},
			{"Commits and interval", "Committed transactions per second (left), and the median time from one commit's start to the next's (right; scheduled by load: at light load a commit follows the last one's end, under a backlog they space out up to WithCommitInterval).", "cps", []query{
				{rate("group", "onceflow_transactions_committed_total"), "{{group}} commits", ""},
				right(query{expr: p("0.5", "group", "onceflow_commit_interval_seconds"), legend: "{{group}} interval p50"}, "s"),
			}},
			{"Commit size", "Input records per committed transaction (left), and the byte budget a transaction takes in before it commits (right; halved after a slow end: one that stays at its minimum means the brokers cannot take the load).", "short", []query{
				{rate("group", "onceflow_records_consumed_total") + " / " + rate("group", "onceflow_transactions_committed_total"), "{{group}} records per transaction", ""},
				right(query{expr: "max by (group, instance) (onceflow_transaction_budget_bytes" + sel + ")", legend: "{{instance}} budget"}, "bytes"),
			}},
			{"Ring occupancy", "Transactions begun and not ended per instance: the open one once it holds work, and one ending. At most the ring's size (WithTransactionPipeline, 2 by default); a ring that is always full means commits, not handlers, set the pace.", "short", []query{
				{"max by (group, instance) (onceflow_transactions_in_flight" + sel + ")", "{{instance}}", ""},
			}},
		}},
		{"Failures", []panel{
			{"Aborts by reason", "Aborted transactions per second: refused (the offset commit or EndTxn refused: a rebalance, an expelled member), produce (a record failed), revoked (work of a partition revoked or lost since), cascade (the abort of the transaction before it). Their work is redone, exactly once.", "cps", []query{
				{rate("group, reason", "onceflow_transactions_aborted_total"), "{{group}} {{reason}}", ""},
			}},
			{"Dead letters by reason", "Records written to the dead-letter topic per second: permanent, retries-exhausted, stuck, event-id-too-long, panic. The onceflow-dlq-error header of each says why.", "cps", []query{
				{rate("group, reason", "onceflow_records_dead_lettered_total"), "{{group}} {{reason}}", ""},
			}},
			{"Retries and redone work", "Handler retries after transient errors, and finished records whose work an aborted transaction threw away (handled again), per second.", "cps", []query{
				{rate("group", "onceflow_retries_total"), "{{group}} retries", ""},
				{rate("group", "onceflow_records_reprocessed_total"), "{{group}} reprocessed", ""},
			}},
			{"Fencing, rebuilds, rebalances", "Per instance and interval: fenced by a newer process with the same instance ID (it stops), transactional clients rebuilt (timeouts, unknown commit outcomes), group rebalances, and partitions resumed from the position log (WithPositionGuard).", "short", []query{
				{"sum by (group, instance) (increase(onceflow_fenced_total" + sel + "[$__rate_interval]))", "{{instance}} fenced", ""},
				{"sum by (group, instance) (increase(onceflow_client_rebuilds_total" + sel + "[$__rate_interval]))", "{{instance}} rebuilds", ""},
				{"sum by (group, instance) (increase(onceflow_rebalances_total" + sel + "[$__rate_interval]))", "{{instance}} rebalances", ""},
				{"sum by (group, instance) (increase(onceflow_position_regressions_total" + sel + "[$__rate_interval]))", "{{instance}} position regressions", ""},
			}},
		}},
		{"Sessions", []panel{
			{"Sessions in flight", "Sessions with records queued, running or backing off, per instance. Sessions cost memory only while they have records.", "short", []query{
				{"sum by (group, instance) (onceflow_active_sessions" + sel + ")", "{{instance}}", ""},
			}},
			{"State and dedupe restores", "Changelog records replayed into the state store (WithStateStore) and the dedupe store (WithDedupe) per second: after an assignment, a new owner restores before it processes.", "cps", []query{
				{rate("group, instance", "onceflow_state_restored_records_total"), "{{instance}} state", ""},
				{rate("group, instance", "onceflow_dedupe_restored_marks_total"), "{{instance}} dedupe", ""},
			}},
		}},
	}
}

// variables are the dashboard's: a Prometheus data source, and the
// groups and instances found under variableMetric.
const variableMetric = "onceflow_transactions_committed_total"

var (
	groupValues    = "label_values(" + variableMetric + ", group)"
	instanceValues = `label_values(` + variableMetric + `{group=~"$group"}, instance)`
)

// Used returns the metric names the dashboard queries, sorted.
func Used() ([]string, error) {
	var names []string
	for _, e := range exprs() {
		n, err := MetricNames(e.expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.where, err)
		}
		names = append(names, n...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// located is an expression and where the dashboard has it.
type located struct{ where, expr string }

func exprs() []located {
	var out []located
	for _, q := range []string{groupValues, instanceValues} {
		out = append(out, located{"variable query " + q, q})
	}
	for _, r := range layout() {
		for _, pn := range r.panels {
			for _, q := range pn.queries {
				out = append(out, located{fmt.Sprintf("panel %q", pn.title), q.expr})
			}
		}
	}
	return out
}

// Dashboard returns the dashboard's JSON, refusing a query of a metric
// that exported lacks: the error names each such metric and its panel.
func Dashboard(exported Exported) ([]byte, error) {
	var errs []error
	for _, e := range exprs() {
		names, err := MetricNames(e.expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.where, err))
			continue
		}
		for _, n := range exported.Missing(names) {
			errs = append(errs, fmt.Errorf("%s queries %s, which onceflow does not export", e.where, n))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d, err := build().Build()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func build() *dashboard.DashboardBuilder {
	ds := common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
	b := dashboard.NewDashboardBuilder("onceflow").
		Uid("onceflow").
		Description("onceflow processors: throughput, lag, commits, failures and sessions, from the onceflow_* metrics (docs/operations.md#metrics). Generated by the dashboards module of github.com/onceflow/onceflow; edit there, not here.").
		Tags([]string{"onceflow", "kafka"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("group").
			Label("Group").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr(groupValues)}).
			Definition(groupValues).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			AllValue(".*")).
		WithVariable(dashboard.NewQueryVariableBuilder("instance").
			Label("Instance").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr(instanceValues)}).
			Definition(instanceValues).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			AllValue(".*"))
	id := uint32(0)
	for _, r := range layout() {
		id++
		b = b.WithRow(dashboard.NewRowBuilder(r.title).Id(id))
		for _, pn := range r.panels {
			id++
			tp := timeseries.NewPanelBuilder().
				Id(id).
				Title(pn.title).
				Description(pn.description).
				Datasource(ds).
				Unit(pn.unit).
				Min(0).
				Span(12).
				Height(8).
				FillOpacity(10).
				Legend(common.NewVizLegendOptionsBuilder().
					DisplayMode(common.LegendDisplayModeList).
					Placement(common.LegendPlacementBottom).
					ShowLegend(true))
			for i, q := range pn.queries {
				ref := string(rune('A' + i))
				tp = tp.WithTarget(prometheus.NewDataqueryBuilder().
					RefId(ref).
					Datasource(ds).
					Expr(q.expr).
					LegendFormat(q.legend))
				if q.unit != "" {
					tp = tp.OverrideByQuery(ref, []dashboard.DynamicConfigValue{
						{Id: "unit", Value: q.unit},
						{Id: "custom.axisPlacement", Value: "right"},
					})
				}
			}
			b = b.WithPanel(tp)
		}
	}
	return b
}

// grafanaVars are the Grafana variables the queries use, with values that
// make them PromQL for the parser.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// MetricNames parses a PromQL expression (a dashboard's, with Grafana's
// $__rate_interval and friends, or a label_values variable query) and
// returns the metric names its selectors name.
func MetricNames(expr string) ([]string, error) {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	node, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", expr, err)
	}
	var names []string
	var unnamed error
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			unnamed = fmt.Errorf("%q selects series without naming a metric: %s", expr, vs)
			return nil
		}
		names = append(names, name)
		return nil
	})
	if unnamed != nil {
		return nil, unnamed
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
