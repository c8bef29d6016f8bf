// Package version says which build of onceflow a command is, for the
// commands' -version flag. It reads what the go command stamped into the
// binary (runtime/debug.ReadBuildInfo): the module version that `go
// install …@v0.1.0` builds, or "(devel)" for a build in a checkout, and the
// VCS revision, commit time and modified flag when the build recorded them
// (a build in a git checkout without -buildvcs=false).
package version

import (
	"runtime/debug"
	"strings"
)

// Line is the one line that program's -version prints: its module's
// version, then in brackets the module path, the Go version and the VCS
// settings present. info nil (a binary without build info) says so.
func Line(program string, info *debug.BuildInfo) string {
	if info == nil {
		return program + " (no build info)"
	}
	v := info.Main.Version
	if v == "" {
		// A test binary's main module has no version.
		v = "(devel)"
	}
	var about []string
	if info.Main.Path != "" {
		about = append(about, info.Main.Path)
	}
	if info.GoVersion != "" {
		about = append(about, info.GoVersion)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if r := settings["vcs.revision"]; r != "" {
		about = append(about, "revision "+r)
	}
	if t := settings["vcs.time"]; t != "" {
		about = append(about, "committed "+t)
	}
	if settings["vcs.modified"] == "true" {
		about = append(about, "modified")
	}
	if len(about) == 0 {
		return program + " " + v
	}
	return program + " " + v + " (" + strings.Join(about, ", ") + ")"
}

// Current is Line for the running binary.
func Current(program string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return Line(program, info)
}
