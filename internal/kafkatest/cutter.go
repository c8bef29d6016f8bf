package kafkatest

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Cutter simulates the abrupt death of a client inside a test: after Cut,
// every connection of the client is closed and no new one can be made, so
// nothing it still tries (an EndTxn, a LeaveGroup) reaches the cluster.
// To the cluster this is exactly a crashed process.
type Cutter struct {
	mu    sync.Mutex
	cut   bool
	until time.Time // with cut: refuse dials until then (zero: forever)
	conns []net.Conn
}

var errCut = errors.New("kafkatest: connection cut")

// Opt returns the client option that routes dials through the cutter.
// Against a secured listener (EnvSecurityPrefix) the dial also does the
// TLS handshake: the option replaces the client's dialer, TLS included.
func (c *Cutter) Opt() kgo.Opt {
	var d net.Dialer
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cut && (c.until.IsZero() || time.Now().Before(c.until)) {
			return nil, errCut
		}
		conn, err := d.DialContext(ctx, network, host)
		if err == nil {
			c.conns = append(c.conns, conn)
		}
		return conn, err
	}
	if Real() {
		if tlsDial, err := envSecurity().Dial(dial); err == nil {
			return kgo.Dialer(tlsDial)
		}
	}
	return kgo.Dialer(dial)
}

// Cut closes every connection and refuses new ones.
func (c *Cutter) Cut() { c.CutFor(0) }

// CutFor closes every connection and refuses new ones for d (0: forever):
// a network partition that heals.
func (c *Cutter) CutFor(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	c.until = time.Time{}
	if d > 0 {
		c.until = time.Now().Add(d)
	}
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// Heal ends a cut: the client can connect again (a partition healed, or a
// paused process woken).
func (c *Cutter) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = false
}
