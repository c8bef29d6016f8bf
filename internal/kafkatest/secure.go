package kafkatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/clientsec"
)

// EnvSecurityPrefix prefixes the environment variables that make the
// tests' clients speak TLS and SASL to KAFKA_BROKERS (the secured pass of
// `make test`; see clientsec.FromEnv): KAFKA_TLS_CA, KAFKA_SASL_MECHANISM,
// KAFKA_SASL_USER, KAFKA_SASL_PASSWORD, ...
const EnvSecurityPrefix = "KAFKA_"

// envSecurity is the security the environment asks of real brokers.
func envSecurity() clientsec.Config { return clientsec.FromEnv(EnvSecurityPrefix) }

// SecuredEnv reports whether the tests run against a secured listener
// (KAFKA_BROKERS with TLS or SASL settings).
func SecuredEnv() bool { return Real() && envSecurity().Secured() }

// Secured makes an embedded cluster require TLS and SASL (SCRAM-SHA-512,
// user SecuredUser): a throwaway CA and certificate are made for it. The
// cluster's Security and ClientOpts carry what a client needs. Against
// real brokers it has no effect: the environment says how they are
// secured.
func Secured() Option { return func(c *config) { c.secured = true } }

// The embedded secured cluster's SASL user.
const (
	SecuredUser     = "onceflow"
	SecuredPassword = "onceflow-secret"
)

// secureFake returns the kfake options of a secured embedded cluster and
// the client side's settings.
func secureFake(t testing.TB) ([]kfake.Opt, clientsec.Config) {
	t.Helper()
	dir := t.TempDir()
	serverCert, caFile, err := throwawayCA(dir)
	if err != nil {
		t.Fatalf("kafkatest: making certificates: %v", err)
	}
	opts := []kfake.Opt{
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser(clientsec.ScramSHA512, SecuredUser, SecuredPassword),
	}
	return opts, clientsec.Config{TLS: true, CAFile: caFile, Mechanism: clientsec.ScramSHA512,
		User: SecuredUser, Password: SecuredPassword}
}

// throwawayCA writes a CA certificate to dir/ca.pem and returns a server
// certificate for 127.0.0.1 and localhost signed by it.
func throwawayCA(dir string) (tls.Certificate, string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "onceflow test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		return tls.Certificate{}, "", err
	}
	return tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}, caFile, nil
}

// clientOpts are the options a client of the cluster needs: TLS through a
// dialer (so that a Cutter can wrap it) and SASL.
func clientOpts(t testing.TB, sec clientsec.Config) []kgo.Opt {
	t.Helper()
	opts, err := sec.DialOpts()
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return opts
}
