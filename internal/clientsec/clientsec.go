// Package clientsec turns the TLS and SASL settings of onceflow's commands
// (cmd/onceflow, cmd/eosbench) and of the tests' secured pass into
// franz-go client options. Applications pass such options themselves,
// through processor.WithKgoOpts (see the README, "Secured clusters"); this
// package is what the commands and tests share, so that every client they
// open is built from one Config and none can go out unsecured.
package clientsec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms Config knows.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Config is how a client reaches a secured listener. The zero value is a
// PLAINTEXT client. It is JSON-serializable, so that eosbench can hand it
// to its worker processes.
type Config struct {
	// TLS dials with TLS (Kafka's SSL and SASL_SSL listeners). Implied
	// by CAFile, CertFile and ServerName.
	TLS bool `json:"tls,omitempty"`
	// CAFile is a PEM file of the CAs that sign the brokers'
	// certificates; empty: the system's roots.
	CAFile string `json:"tls_ca,omitempty"`
	// CertFile and KeyFile are a PEM client certificate and key, for
	// listeners that require them (ssl.client.auth=required).
	CertFile string `json:"tls_cert,omitempty"`
	KeyFile  string `json:"tls_key,omitempty"`
	// ServerName overrides the name checked in the brokers'
	// certificates (default: the host dialed).
	ServerName string `json:"tls_server_name,omitempty"`

	// Mechanism is the SASL mechanism: PLAIN, SCRAM-SHA-256 or
	// SCRAM-SHA-512; empty: no SASL.
	Mechanism string `json:"sasl_mechanism,omitempty"`
	User      string `json:"sasl_user,omitempty"`
	Password  string `json:"sasl_password,omitempty"`
}

// PasswordEnv is the environment variable the flags read the SASL password
// from when -sasl-password is not given, so that it need not appear in a
// process listing.
const PasswordEnv = "ONCEFLOW_SASL_PASSWORD"

// RegisterFlags binds the TLS and SASL flags to c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.TLS, "tls", c.TLS, "dial the brokers with TLS (implied by -tls-ca, -tls-cert and -tls-server-name)")
	fs.StringVar(&c.CAFile, "tls-ca", c.CAFile, "PEM `file` of the CAs that sign the brokers' certificates (default: the system's roots)")
	fs.StringVar(&c.CertFile, "tls-cert", c.CertFile, "PEM client certificate `file`, for listeners that require one")
	fs.StringVar(&c.KeyFile, "tls-key", c.KeyFile, "PEM client key `file` (with -tls-cert)")
	fs.StringVar(&c.ServerName, "tls-server-name", c.ServerName, "`name` to check in the brokers' certificates (default: the host dialed)")
	fs.StringVar(&c.Mechanism, "sasl-mechanism", c.Mechanism, "SASL `mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: none)")
	fs.StringVar(&c.User, "sasl-user", c.User, "SASL `user`")
	fs.StringVar(&c.Password, "sasl-password", c.Password, "SASL `password` (default: $"+PasswordEnv+")")
}

// FromEnv reads a Config from environment variables named prefix+TLS
// ("1" or "true"), prefix+TLS_CA, prefix+TLS_CERT, prefix+TLS_KEY,
// prefix+TLS_SERVER_NAME, prefix+SASL_MECHANISM, prefix+SASL_USER and
// prefix+SASL_PASSWORD: the tests' secured pass sets KAFKA_… ones.
func FromEnv(prefix string) Config {
	get := func(k string) string { return os.Getenv(prefix + k) }
	tlsOn := get("TLS")
	return Config{
		TLS:        tlsOn == "1" || strings.EqualFold(tlsOn, "true"),
		CAFile:     get("TLS_CA"),
		CertFile:   get("TLS_CERT"),
		KeyFile:    get("TLS_KEY"),
		ServerName: get("TLS_SERVER_NAME"),
		Mechanism:  get("SASL_MECHANISM"),
		User:       get("SASL_USER"),
		Password:   get("SASL_PASSWORD"),
	}
}

// Secured reports whether c asks for TLS or SASL.
func (c Config) Secured() bool { return c.tlsOn() || c.Mechanism != "" }

func (c Config) tlsOn() bool {
	return c.TLS || c.CAFile != "" || c.CertFile != "" || c.ServerName != ""
}

// ErrConfig wraps every error in a Config.
var ErrConfig = errors.New("clientsec: bad TLS or SASL settings")

// WithPasswordFromEnv returns c with Password read from PasswordEnv if it
// names a SASL mechanism and has no password.
func (c Config) WithPasswordFromEnv() Config {
	if c.Mechanism != "" && c.Password == "" {
		c.Password = os.Getenv(PasswordEnv)
	}
	return c
}

// Opts returns the client options: kgo.DialTLSConfig and kgo.SASL as
// needed (none for the zero Config).
func (c Config) Opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.tlsOn() {
		tc, err := c.TLSConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	m, err := c.mechanism()
	if err != nil {
		return nil, err
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// DialOpts is Opts with TLS done by a kgo.Dialer instead of
// kgo.DialTLSConfig (franz-go refuses both in one client): for callers that
// wrap the dial, as the tests' connection cutter does (see Dial).
func (c Config) DialOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.tlsOn() {
		dial, err := c.Dial(nil)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer(dial))
	}
	m, err := c.mechanism()
	if err != nil {
		return nil, err
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// Dial returns a dial function for kgo.Dialer that dials with next (nil: a
// net.Dialer with franz-go's default 10s timeout) and, if c asks for TLS,
// completes a TLS handshake over the connection.
func (c Config) Dial(next func(ctx context.Context, network, host string) (net.Conn, error)) (func(ctx context.Context, network, host string) (net.Conn, error), error) {
	if next == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		next = d.DialContext
	}
	if !c.tlsOn() {
		return next, nil
	}
	base, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := next(ctx, network, host)
		if err != nil {
			return nil, err
		}
		tc := base.Clone()
		if tc.ServerName == "" {
			if tc.ServerName, _, err = net.SplitHostPort(host); err != nil {
				conn.Close()
				return nil, err
			}
		}
		tconn := tls.Client(conn, tc)
		if err := tconn.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tconn, nil
	}, nil
}

// TLSConfig returns the TLS configuration c describes.
func (c Config) TLSConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the CA file: %v", ErrConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: no PEM certificate in %s", ErrConfig, c.CAFile)
		}
		tc.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both a certificate and a key file", ErrConfig)
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: loading the client certificate: %v", ErrConfig, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func (c Config) mechanism() (sasl.Mechanism, error) {
	if c.Mechanism == "" {
		if c.User != "" {
			return nil, fmt.Errorf("%w: a SASL user without a mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", ErrConfig)
		}
		return nil, nil
	}
	if c.User == "" {
		return nil, fmt.Errorf("%w: SASL %s needs a user", ErrConfig, c.Mechanism)
	}
	switch strings.ToUpper(c.Mechanism) {
	case Plain:
		return plain.Auth{User: c.User, Pass: c.Password}.AsMechanism(), nil
	case ScramSHA256:
		return scram.Auth{User: c.User, Pass: c.Password}.AsSha256Mechanism(), nil
	case ScramSHA512:
		return scram.Auth{User: c.User, Pass: c.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%w: unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", ErrConfig, c.Mechanism)
}

// IsAuthError reports whether err is a refusal that retrying cannot cure:
// a listener that speaks TLS or SASL the client does not (franz-go's
// ErrFirstReadEOF), failed or unsupported SASL, a broker certificate the
// client does not trust, a plaintext broker dialed with TLS, or an
// authorization failure.
func IsAuthError(err error) bool {
	if err == nil {
		return false
	}
	var (
		eof      *kgo.ErrFirstReadEOF
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
	)
	if errors.As(err, &eof) || errors.As(err, &verify) || errors.As(err, &unknown) ||
		errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &header) {
		return true
	}
	// A plaintext client answered with a TLS alert: franz-go says so in
	// an unwrapped error, so its words are all there is to match.
	if strings.Contains(err.Error(), "is this a plaintext connection speaking to a tls endpoint") {
		return true
	}
	for _, e := range []error{kerr.SaslAuthenticationFailed, kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism,
		kerr.ClusterAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Probe connects to the seed brokers of cl, one at a time, and returns nil
// as soon as one answers a Metadata request (for no topics), or an error
// IsAuthError reports once it has come back after a pause: a broker that
// is shutting down or restarting may also close a new connection at once,
// but only for a moment. Brokers that cannot be reached are tried again
// after retry, until ctx ends; then Probe returns the last error. A client
// whose connection is refused for good thus fails within about retry, with
// the reason, where a franz-go client would retry every request until its
// timeout.
func Probe(ctx context.Context, cl *kgo.Client, retry time.Duration) error {
	refused := false // the last round ended in a refusal
	for {
		var last error
		round := false
		for _, b := range cl.SeedBrokers() {
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{}
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			_, err := b.Request(rctx, req)
			cancel()
			if err == nil {
				return nil
			}
			if IsAuthError(err) {
				if refused {
					return err
				}
				round = true
			}
			last = err
		}
		refused = round
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return last
		case <-time.After(retry):
		}
	}
}
