package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/version"
)

// TestVersion: -version, --version and version print one line naming
// onceflow and the module's version and exit 0 without touching Kafka;
// the usage names the command.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"-version", "--version", "version"} {
		var stdout, stderr bytes.Buffer
		status := run(context.Background(), []string{arg}, &stdout, &stderr)
		require.Equal(t, exitOK, status, "%s: stderr: %s", arg, stderr.String())
		require.Empty(t, stderr.String(), arg)
		require.Regexp(t, `^onceflow \S+( \(.*\))?\n$`, stdout.String(), arg)
		require.Equal(t, version.Current("onceflow")+"\n", stdout.String(), arg)
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"help"}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "\n  version ")
}
