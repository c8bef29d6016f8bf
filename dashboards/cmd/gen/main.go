// Command gen writes onceflow's Grafana dashboard, after checking it and
// the alert rules against the metrics a processor exports (a small job on
// an in-process cluster, scraped): a query of a metric the processor does
// not export fails the run, naming the metric. Run it from the dashboards
// module (go generate does):
//
//	cd dashboards && go run ./cmd/gen
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/onceflow/onceflow/dashboards"
)

func main() {
	out := flag.String("out", "../docs/dashboards/onceflow.json", "write the dashboard to this `file`")
	rules := flag.String("rules", "../docs/dashboards/onceflow-rules.yml", "check this Prometheus rules `file`")
	flag.Parse()
	if err := run(*out, *rules, 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// run checks the dashboard and the rules in rulesFile against a run's
// metrics, waiting up to wait for them to appear, and writes the dashboard
// to out.
func run(out, rulesFile string, wait time.Duration) error {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		return err
	}
	used, err := dashboards.Used()
	if err != nil {
		return err
	}
	inRules, err := dashboards.RuleMetrics(rules)
	if err != nil {
		return fmt.Errorf("%s: %w", rulesFile, err)
	}
	// A metric the processor does not export never appears: the
	// deadline bounds that wait.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	exported, err := dashboards.ScrapeRun(ctx, slices.Concat(used, inRules))
	if err != nil {
		return err
	}
	if err := dashboards.CheckRules(rules, exported); err != nil {
		return fmt.Errorf("%s: %w", rulesFile, err)
	}
	data, err := dashboards.Dashboard(exported)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gen: wrote %s; the dashboard's %d metrics and the rules' %d are among the %d series names a run exported\n",
		out, len(used), len(inRules), len(exported))
	return nil
}
