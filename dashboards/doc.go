// Package dashboards generates onceflow's Grafana dashboard
// (docs/dashboards/onceflow.json) with the Grafana Foundation SDK and
// checks its Prometheus alert rules (docs/dashboards/onceflow-rules.yml)
// against the metrics a processor exports.
//
// It is a module of its own so that the SDK and Prometheus's rule parser
// stay out of the library's requirements: an importer of onceflow gets
// neither. What a processor exports is read from a run, not from a list:
// ScrapeRun runs a small job on an in-process cluster with WithMetrics and
// scrapes its /metrics, and Dashboard and CheckRules refuse a query of a
// metric the scrape did not show, naming it.
//
// Regenerate the dashboard after changing it here (the tests fail while
// the committed JSON differs):
//
//	cd dashboards && go generate
package dashboards

//go:generate go run ./cmd/gen
