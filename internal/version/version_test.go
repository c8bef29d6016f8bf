package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	const mod = "github.com/onceflow/onceflow"
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"go install of a release", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: mod, Version: "v0.1.0"}},
			"eosbench v0.1.0 (github.com/onceflow/onceflow, go1.26.8)"},
		{"built in a checkout with VCS stamping", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: mod, Version: "v0.1.1-0.20261206101500-4e40cc5d1c2a+dirty"},
			Settings: []debug.BuildSetting{
				{Key: "-compiler", Value: "gc"},
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: "4e40cc5d1c2a0000000000000000000000000000"},
				{Key: "vcs.time", Value: "2026-12-06T10:15:00Z"},
				{Key: "vcs.modified", Value: "true"},
			}},
			"eosbench v0.1.1-0.20261206101500-4e40cc5d1c2a+dirty (github.com/onceflow/onceflow, go1.26.8, " +
				"revision 4e40cc5d1c2a0000000000000000000000000000, committed 2026-12-06T10:15:00Z, modified)"},
		{"unmodified checkout", &debug.BuildInfo{
			Main: debug.Module{Path: mod, Version: "(devel)"},
			Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "4e40cc5"},
				{Key: "vcs.modified", Value: "false"},
			}},
			"eosbench (devel) (github.com/onceflow/onceflow, revision 4e40cc5)"},
		{"-buildvcs=false in a checkout", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: mod, Version: "(devel)"}},
			"eosbench (devel) (github.com/onceflow/onceflow, go1.26.8)"},
		{"no version at all", &debug.BuildInfo{}, "eosbench (devel)"},
		{"no build info", nil, "eosbench (no build info)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line("eosbench", tc.info); got != tc.want {
				t.Errorf("Line:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestCurrent: a test binary has build info; its line names the program
// and the Go version that built it.
func TestCurrent(t *testing.T) {
	got := Current("onceflow")
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build info in this test binary")
	}
	if !strings.HasPrefix(got, "onceflow ") || !strings.Contains(got, info.GoVersion) {
		t.Errorf("Current = %q, want onceflow's line with %s", got, info.GoVersion)
	}
}
