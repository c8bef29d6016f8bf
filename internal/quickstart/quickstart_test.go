package quickstart

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
)

// TestQuickstart: the README's quick start is a complete program that
// compiles and vets as a module of its own that requires onceflow (a
// replace to this checkout, so franz-go comes from upstream, as for every
// importer). Issue 33, finding 7: it was a fragment (undefined: parse,
// ctx; no imports).
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	repo := repoRoot(t)
	dir := quickstartModule(t, repo, repo)
	goCmd(t, dir, nil, "vet", ".")
	goCmd(t, dir, nil, "build", "-o", filepath.Join(t.TempDir(), "quickstart"), ".")
}

// extractQuickstart returns the first ```go block under the README's
// "## Quick start" heading: what /work/shared/hooks/before-stop's awk
// extracts.
func extractQuickstart(readme []byte) (string, error) {
	_, rest, ok := bytes.Cut(readme, []byte("\n## Quick start\n"))
	if !ok {
		return "", errors.New(`README.md has no "## Quick start" section`)
	}
	if next := bytes.Index(rest, []byte("\n## ")); next >= 0 {
		rest = rest[:next]
	}
	_, code, ok := bytes.Cut(rest, []byte("\n```go\n"))
	if !ok {
		return "", errors.New("the quick start has no ```go block")
	}
	code, _, ok = bytes.Cut(code, []byte("\n```"))
	if !ok {
		return "", errors.New("the quick start's ```go block does not end")
	}
	return string(code) + "\n", nil
}

// quickstartModule writes a module "example.com/quickstart" whose main.go
// is the README's quick start, requiring onceflow replaced by the module
// in onceflowDir, and resolves its requirements.
func quickstartModule(t *testing.T, repo, onceflowDir string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := extractQuickstart(readme)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(code, "package main\n") {
		t.Fatalf("the quick start is not a program: it starts %q", strings.SplitN(code, "\n", 2)[0])
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "main.go"), code)
	mod := modulePath(t, repo)
	write(t, filepath.Join(dir, "go.mod"), "module example.com/quickstart\n\ngo 1.26.0\n\n"+
		"require "+mod+" v0.0.0\n\nreplace "+mod+" => "+onceflowDir+"\n")
	// The checkout's sums cover every requirement but upstream franz-go,
	// which the checkout replaces: fewer look-ups.
	if sums, err := os.ReadFile(filepath.Join(repo, "go.sum")); err == nil {
		write(t, filepath.Join(dir, "go.sum"), string(sums))
	}
	return dir
}

// goCmd runs the go command in dir, offline first: modules come from the
// module cache as a proxy, then from the environment's GOPROXY.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY="+moduleProxy(t, dir))
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return string(out)
}

// moduleProxy is the GOPROXY list of goCmd: the module cache's downloads,
// then the environment's proxy.
func moduleProxy(t *testing.T, dir string) string {
	t.Helper()
	cache := strings.TrimSpace(goOutput(t, dir, "env", "GOMODCACHE"))
	proxy := "file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download"))
	if p := strings.TrimSpace(goOutput(t, dir, "env", "GOPROXY")); p != "" && p != "off" {
		proxy += "," + p
	}
	return proxy
}

func goOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// repoRoot is the directory of the module this test belongs to.
func repoRoot(t *testing.T) string {
	t.Helper()
	gomod := strings.TrimSpace(goOutput(t, ".", "env", "GOMOD"))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not in a module")
	}
	return filepath.Dir(gomod)
}

func modulePath(t *testing.T, repo string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	return modfile.ModulePath(data)
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
