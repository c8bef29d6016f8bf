package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMissingMetric: a generator run whose rules name a metric the
// processor does not export fails with the metric's name, and writes no
// dashboard.
func TestMissingMetric(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: g
    rules:
      - alert: Renamed
        expr: increase(onceflow_renamed_total[5m]) > 0
        labels: {severity: warning}
        annotations: {summary: s, description: d}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "onceflow.json")
	// The wait is for a metric that never comes: keep it short.
	err := run(out, rules, 2*time.Second)
	if want := "rule Renamed names onceflow_renamed_total, which onceflow does not export"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("run: %v, want an error saying %q", err, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the failed run wrote %s (%v)", out, err)
	}
}
