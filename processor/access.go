package processor

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/clientsec"
)

// checkAccess connects to the brokers once, with the options every client
// of the processor gets, before Run builds any of them. A refusal that
// retrying cannot cure (a listener that wants TLS or SASL the options do
// not give, a wrong password, an untrusted certificate) stops Run with
// ErrUnauthenticated and franz-go's reason; franz-go's own clients would
// retry such a connection until each request's timeout, and the group and
// transaction loops forever. A refusal counts once it came back after a
// pause (clientsec.Probe): a restarting broker closes new connections too,
// for a moment. Brokers that cannot be reached yet are waited for, as Run
// always has.
func checkAccess(ctx context.Context, cfg *config) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.brokers...)}, cfg.clientOpts()...)...)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	defer cl.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, accessWait)
		err := clientsec.Probe(pctx, cl, time.Second)
		cancel()
		switch {
		case err == nil:
			return nil
		case clientsec.IsAuthError(err):
			return fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		case ctx.Err() != nil:
			return nil // Run returns nil on a stop, as below
		}
		cfg.logger.Warn("cannot reach the brokers; retrying", "brokers", cfg.brokers, "err", err)
	}
}

// accessWait is how long checkAccess tries before it logs and goes on
// trying.
const accessWait = 10 * time.Second
