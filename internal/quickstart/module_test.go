package quickstart

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestModuleAsServed builds onceflow's module zip as the Go proxy serves
// it (golang.org/x/mod/zip, the proxy's own rules), and in a module of its
// own that requires it, with franz-go from upstream, vets the quick start
// and runs its job on an embedded cluster under each group protocol,
// checking exactly-once and bounded progress (testdata/job_test.go).
// Issue 33, finding 6: `go get` delivers none of the main module's
// replace directives (onceflow carried a franz-go patch through one until
// its ring of producers made it unneeded), so this is what every importer
// runs. It also runs the README's `go install …@latest` lines against a
// proxy serving that zip, and each command's -version (issue 46).
func TestModuleAsServed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own and runs a job in it")
	}
	repo := repoRoot(t)
	mod := modulePath(t, repo)
	unzipped, zipPath := moduleAsServed(t, repo, mod)
	t.Run("go install", func(t *testing.T) { goInstallAsServed(t, repo, mod, zipPath) })

	dir := quickstartModule(t, repo, unzipped)
	job, err := os.ReadFile(filepath.Join("testdata", "job_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "job_test.go"), string(job))
	goCmd(t, dir, nil, "vet", ".")
	if got := strings.TrimSpace(goCmd(t, dir, nil, "list", "-m", "-f", "{{.Version}} {{.Replace}}", "github.com/twmb/franz-go")); got != "v1.22.3 <nil>" {
		t.Fatalf("franz-go in a module that imports onceflow: %q, want upstream v1.22.3 without a replace", got)
	}
	for _, protocol := range []string{"classic", "consumer"} {
		t.Run(protocol, func(t *testing.T) {
			out := goCmd(t, dir, []string{"ONCEFLOW_GROUP_PROTOCOL=" + protocol},
				"test", "-count=1", "-timeout=5m", "-run=^TestQuickstartJob$", "-v", ".")
			var warnings []string
			for _, line := range strings.Split(out, "\n") {
				switch {
				case strings.Contains(line, "job_test.go"):
					t.Log(strings.TrimSpace(line))
				case strings.Contains(line, "level=WARN"), strings.Contains(line, "level=ERROR"):
					warnings = append(warnings, line)
				}
			}
			// What an importer's operator would see: the rebuilds
			// and aborts of upstream franz-go, say.
			t.Logf("%d warnings and errors logged", len(warnings))
			for _, w := range warnings[:min(len(warnings), 5)] {
				t.Log(w)
			}
		})
	}
}

// servedVersion is the version the module zip is served as: a
// pseudo-version, as for a commit without a tag.
const servedVersion = "v0.0.0-20260101000000-000000000000"

// moduleAsServed makes the module zip of the checkout's files (tracked,
// or new and not ignored: what a commit of the working tree would hold) as
// the proxy would serve servedVersion of it, and returns the directory it
// unzips to and the zip. Nested modules (dashboards/) are left out, as
// the proxy leaves them out.
func moduleAsServed(t *testing.T, repo, mod string) (dir, zipPath string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = repo
	list, err := cmd.Output()
	if err != nil {
		t.Skipf("SKIPPED: the module zip is made from git's file list, and git ls-files failed in %s: %v", repo, err)
	}
	var files []modzip.File
	for _, p := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		fi, err := os.Lstat(filepath.Join(repo, p))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		files = append(files, diskFile{filepath.ToSlash(p), filepath.Join(repo, p), fi})
	}
	checked, err := modzip.CheckFiles(files)
	if err != nil {
		t.Fatalf("the module's files: %v", err)
	}
	t.Logf("module zip: %d files; %d left out", len(checked.Valid), len(checked.Omitted))

	v := module.Version{Path: mod, Version: servedVersion}
	zipPath = filepath.Join(t.TempDir(), "onceflow.zip")
	var buf bytes.Buffer
	if err := modzip.Create(&buf, v, files); err != nil {
		t.Fatalf("creating the module zip: %v", err)
	}
	write(t, zipPath, buf.String())
	dir = filepath.Join(t.TempDir(), "onceflow")
	if err := modzip.Unzip(dir, v, zipPath); err != nil {
		t.Fatalf("unzipping the module zip: %v", err)
	}
	return dir, zipPath
}

// goInstallAsServed runs the README's `go install …@latest` lines outside
// any module, against a file proxy that serves the module zip as the
// latest version of mod (ahead of the module cache and the environment's
// proxy, for the dependencies), into a module cache of its own, so that no
// earlier run's zip is reused; then runs each command's -version, which
// must name the version served.
func goInstallAsServed(t *testing.T, repo, mod, zipPath string) {
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, m := range regexp.MustCompile("(?m)^go install (\\S+)@latest\\b").FindAllSubmatch(readme, -1) {
		pkgs = append(pkgs, string(m[1]))
	}
	if want := []string{mod + "/cmd/eosbench", mod + "/cmd/onceflow"}; !slices.Equal(pkgs, want) {
		t.Fatalf("README's `go install …@latest` lines install %q, want %q", pkgs, want)
	}

	proxy := t.TempDir()
	at := filepath.Join(proxy, filepath.FromSlash(mod), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	zipData, err := os.ReadFile(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	info := `{"Version":"` + servedVersion + `","Time":"2026-01-01T00:00:00Z"}`
	write(t, filepath.Join(at, "list"), "") // no tags: @latest is the @latest endpoint's
	write(t, filepath.Join(proxy, filepath.FromSlash(mod), "@latest"), info)
	write(t, filepath.Join(at, servedVersion+".info"), info)
	write(t, filepath.Join(at, servedVersion+".mod"), string(gomod))
	write(t, filepath.Join(at, servedVersion+".zip"), string(zipData))

	bin, outside := t.TempDir(), t.TempDir()
	args := []string{"install", "-trimpath"}
	for _, p := range pkgs {
		args = append(args, p+"@latest")
	}
	// -trimpath keeps the build cache's entries independent of the
	// module cache's temporary path, so a second run compiles nothing
	// new; -modcacherw lets the test's cleanup remove that cache. The
	// served pseudo-version is in no checksum database.
	goCmd(t, outside, []string{
		"GOBIN=" + bin,
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "mod"),
		"GOFLAGS=-modcacherw",
		"GONOSUMDB=" + mod,
		"GOPROXY=file://" + filepath.ToSlash(proxy) + "," + moduleProxy(t, outside),
	}, args...)
	for _, p := range pkgs {
		name := path.Base(p)
		out, err := exec.Command(filepath.Join(bin, name), "-version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s -version: %v\n%s", name, err, out)
		}
		want := name + " " + servedVersion + " (" + mod + ", go"
		if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, want) {
			t.Errorf("%s -version printed %q, want a line starting %q", name, got, want)
		} else {
			t.Log(got)
		}
	}
}

// diskFile is a file of the checkout for modzip.
type diskFile struct {
	slashPath, path string
	info            os.FileInfo
}

func (f diskFile) Path() string                 { return f.slashPath }
func (f diskFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }
