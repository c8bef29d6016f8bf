package dashboards

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// rule is a rule's name and the metrics its expression names.
type rule struct {
	name    string
	metrics []string
}

// parseRules parses a Prometheus rules file as Prometheus loads one
// (rulefmt: unknown fields, bad expressions and bad annotation templates
// are errors). Every alert must also carry a severity label and summary
// and description annotations: the page an operator gets says what to do.
func parseRules(data []byte) ([]rule, error) {
	groups, errs := rulefmt.Parse(data, false, model.LegacyValidation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var rules []rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record // one of them is set
			names, err := MetricNames(r.Expr)
			if err != nil {
				errs = append(errs, fmt.Errorf("rule %s: %w", name, err))
			}
			rules = append(rules, rule{name, names})
			if r.Alert == "" {
				continue
			}
			if r.Labels["severity"] == "" {
				errs = append(errs, fmt.Errorf("rule %s: no severity label", name))
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					errs = append(errs, fmt.Errorf("rule %s: no %s annotation", name, a))
				}
			}
		}
	}
	return rules, errors.Join(errs...)
}

// RuleMetrics parses a rules file (see CheckRules) and returns the metric
// names its expressions name, sorted.
func RuleMetrics(data []byte) ([]string, error) {
	rules, err := parseRules(data)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range rules {
		names = append(names, r.metrics...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// CheckRules parses a Prometheus rules file as Prometheus loads one, and
// refuses a rule whose expression names a metric that exported lacks:
// the error names each such metric and its rule. Every alert must carry a
// severity label and summary and description annotations.
func CheckRules(data []byte, exported Exported) error {
	rules, err := parseRules(data)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rules {
		for _, n := range exported.Missing(r.metrics) {
			errs = append(errs, fmt.Errorf("rule %s names %s, which onceflow does not export", r.name, n))
		}
	}
	return errors.Join(errs...)
}
