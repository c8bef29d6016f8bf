package kafkatest

import (
	"context"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Refuser fails a client's dials to chosen brokers as a stopped broker's
// port does, with "connection refused", a set number of times, while the
// broker itself keeps running: a node restarting under a client whose
// metadata still names it. Plaintext only (it replaces the client's
// dialer): for tests on kfake.
type Refuser struct {
	mu      sync.Mutex
	left    map[string]int // address: refusals to come
	refused map[string]int // address: refusals so far
}

// Refuse has the next n dials to addr (host:port) refused.
func (r *Refuser) Refuse(addr string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left == nil {
		r.left, r.refused = make(map[string]int), make(map[string]int)
	}
	r.left[addr] += n
}

// Refused returns how many dials to addr were refused.
func (r *Refuser) Refused(addr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[addr]
}

// Opt returns the client option that routes dials through the refuser.
func (r *Refuser) Opt() kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		r.mu.Lock()
		refuse := r.left[host] > 0
		if refuse {
			r.left[host]--
			r.refused[host]++
		}
		r.mu.Unlock()
		if refuse {
			// What net.Dialer returns when nothing listens on the port.
			return nil, &net.OpError{Op: "dial", Net: network, Addr: tcpAddr(host), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		return d.DialContext(ctx, network, host)
	})
}

func tcpAddr(host string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", host)
	if err != nil {
		return nil
	}
	return a
}
