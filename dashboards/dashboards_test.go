package dashboards

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The files the module generates and checks, from the module's directory
// (where go test runs).
var (
	dashboardFile = filepath.Join("..", "docs", "dashboards", "onceflow.json")
	rulesFile     = filepath.Join("..", "docs", "dashboards", "onceflow-rules.yml")
)

// TestAgainstARun scrapes a processor's /metrics on an in-process cluster
// once, and checks against it that the dashboard and the alert rules query
// only metrics the processor exports (naming any other), and that the
// committed dashboard is what the generator makes of them.
func TestAgainstARun(t *testing.T) {
	used, err := Used()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	inRules, err := RuleMetrics(rules)
	if err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	// ScrapeRun waits for every name it is given; one the processor does
	// not export makes it wait the whole deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	exported, err := ScrapeRun(ctx, slices.Concat(used, inRules))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scraped %d series names in %v", len(exported), time.Since(start).Round(time.Millisecond))

	t.Run("dashboard", func(t *testing.T) {
		for _, n := range exported.Missing(used) {
			t.Errorf("the dashboard queries %s, which a processor's /metrics did not show", n)
		}
	})
	t.Run("rules", func(t *testing.T) {
		if err := CheckRules(rules, exported); err != nil {
			t.Errorf("%s: %v", rulesFile, err)
		}
	})
	t.Run("committed JSON", func(t *testing.T) {
		want, err := Dashboard(exported)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dashboardFile)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator makes (run `cd dashboards && go generate`); first difference:\n%s",
				dashboardFile, firstDiff(got, want))
		}
	})
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n committed: " + gl + "\n generated: " + wl
		}
	}
	return "(none)"
}

// exportedAllBut is every metric the dashboard and the rules query, but
// those named.
func exportedAllBut(t *testing.T, missing ...string) Exported {
	t.Helper()
	used, err := Used()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	inRules, err := RuleMetrics(rules)
	if err != nil {
		t.Fatal(err)
	}
	e := Exported{}
	for _, n := range slices.Concat(used, inRules) {
		e[n] = true
	}
	for _, n := range missing {
		if !e[n] {
			t.Fatalf("%s is queried by neither the dashboard nor the rules", n)
		}
		delete(e, n)
	}
	return e
}

// TestMissingMetric: the generator refuses a dashboard that queries a
// metric the processor does not export, naming it and the panel; the
// rules check names the metric and the rule.
func TestMissingMetric(t *testing.T) {
	_, err := Dashboard(exportedAllBut(t, "onceflow_transactions_in_flight", "onceflow_commit_duration_seconds_bucket"))
	if err == nil {
		t.Fatal("Dashboard: no error without onceflow_transactions_in_flight")
	}
	for _, want := range []string{
		`panel "Ring occupancy" queries onceflow_transactions_in_flight, which onceflow does not export`,
		`panel "Commit round trip" queries onceflow_commit_duration_seconds_bucket, which onceflow does not export`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Dashboard's error %q does not say %q", err, want)
		}
	}

	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckRules(rules, exportedAllBut(t, "onceflow_fenced_total"))
	if want := "rule OnceflowFenced names onceflow_fenced_total, which onceflow does not export"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckRules without onceflow_fenced_total: %v, want an error saying %q", err, want)
	}
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (group) (rate(onceflow_retries_total{group=~"$group"}[$__rate_interval]))`, []string{"onceflow_retries_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(b_bucket[5m]))) / on () a + a`, []string{"a", "b_bucket"}},
		{`label_values(onceflow_transactions_committed_total{group=~"$group"}, instance)`, []string{"onceflow_transactions_committed_total"}},
		{`{__name__="x", group="g"}`, []string{"x"}},
	} {
		got, err := MetricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`rate(x[5m]`, `sum(rate({group="g"}[5m]))`, `{__name__=~"onceflow_.*"}`} {
		if got, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q) = %q, want an error", bad, got)
		}
	}
}

// TestRuleChecks: a rules file that Prometheus would refuse, or an alert
// without what an operator needs to act on it, is an error naming it.
func TestRuleChecks(t *testing.T) {
	const ok = `groups:
  - name: g
    rules:
      - alert: A
        expr: increase(onceflow_fenced_total[5m]) > 0
        labels: {severity: critical}
        annotations: {summary: s, description: d}
`
	if names, err := RuleMetrics([]byte(ok)); err != nil || !slices.Equal(names, []string{"onceflow_fenced_total"}) {
		t.Fatalf("RuleMetrics(ok) = %q, %v", names, err)
	}
	for _, tc := range []struct{ name, rules, want string }{
		{"a bad expression", strings.Replace(ok, "[5m]) > 0", "[5m] > 0", 1), "unclosed left parenthesis"},
		{"no severity", strings.Replace(ok, "severity: critical", "team: x", 1), "rule A: no severity label"},
		{"no description", strings.Replace(ok, ", description: d", "", 1), "rule A: no description annotation"},
		{"an unknown field", strings.Replace(ok, "        labels:", "        lables: {}\n        labels:", 1), "lables"},
		{"a bad template", strings.Replace(ok, "summary: s", `summary: "{{ $labels.group "`, 1), "summary"},
	} {
		if _, err := RuleMetrics([]byte(tc.rules)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: RuleMetrics: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
