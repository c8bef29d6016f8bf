package clientsec

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFlagsAndEnv: the flags and the environment fill the same Config;
// the zero Config is a plaintext client with no options.
func TestFlagsAndEnv(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-tls-ca", "ca.pem", "-sasl-mechanism", "SCRAM-SHA-512", "-sasl-user", "u"}))
	t.Setenv(PasswordEnv, "p")
	c = c.WithPasswordFromEnv()
	require.Equal(t, Config{CAFile: "ca.pem", Mechanism: ScramSHA512, User: "u", Password: "p"}, c)
	require.True(t, c.Secured())

	t.Setenv("KAFKA_TLS", "true")
	t.Setenv("KAFKA_SASL_MECHANISM", "PLAIN")
	t.Setenv("KAFKA_SASL_USER", "u")
	require.Equal(t, Config{TLS: true, Mechanism: Plain, User: "u"}, FromEnv("KAFKA_"))

	opts, err := Config{}.Opts()
	require.NoError(t, err)
	require.Empty(t, opts)
	require.False(t, Config{}.Secured())
}

// TestBadConfig: settings that cannot make a client fail with ErrConfig
// and say why.
func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	for _, c := range []Config{
		{CAFile: filepath.Join(dir, "missing.pem")},
		{CAFile: notPEM},
		{CertFile: "c.pem"},
		{Mechanism: "GSSAPI", User: "u"},
		{Mechanism: ScramSHA256},
		{User: "u"},
	} {
		_, err := c.Opts()
		require.ErrorIs(t, err, ErrConfig, "%+v", c)
	}
	opts, err := Config{TLS: true, Mechanism: "scram-sha-256", User: "u", Password: "p"}.Opts()
	require.NoError(t, err)
	require.Len(t, opts, 2)
	opts, err = Config{TLS: true}.DialOpts()
	require.NoError(t, err)
	require.Len(t, opts, 1)
}

// TestIsAuthError: refusals are told from passing failures.
func TestIsAuthError(t *testing.T) {
	require.True(t, IsAuthError(fmt.Errorf("x: %w", kerr.SaslAuthenticationFailed)))
	require.True(t, IsAuthError(errors.New("invalid large response size 352518912 > limit 104857600; the first three bytes received appear to be a tls alert record for TLS v1.2; is this a plaintext connection speaking to a tls endpoint?")))
	require.True(t, IsAuthError(&kgo.ErrFirstReadEOF{}))
	require.False(t, IsAuthError(kerr.CoordinatorNotAvailable))
	require.False(t, IsAuthError(errors.New("dial tcp 127.0.0.1:1: connect: connection refused")))
	require.False(t, IsAuthError(nil))
}
