package kafkatest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Net puts a fault-injecting TCP proxy between each client and each broker:
// one End per client (a test's name for it: an instance of the job), one
// Link per broker in every End, each a listener of its own on 127.0.0.1.
// Faults act on one link (one broker, as seen from one client) or on every
// link of an End, so that one instance can be cut off while the others are
// not: added latency, a blackhole (connections hang, nothing is answered),
// a cut (connections reset, new ones refused), resets of single
// connections, and a cut triggered by a request passing (an EndTxn in
// flight).
//
// How clients reach it: through their dialer, not the brokers' advertised
// addresses. A client gets End.Opt (in-process) or, for a worker process,
// End.DialMap's "broker=proxy,..." list, which the worker turns into a
// kgo.Dialer that dials a broker's address through its proxy. Bootstrap
// and metadata-advertised connections both go through the proxy, since
// both are dials of a broker's address. The alternative, a listener whose
// advertised addresses are a proxy's (broker.sh would advertise proxy
// ports), routes every client through one proxy per broker: it cannot cut
// one instance off while the others go on, needs the cluster restarted
// with other listeners, and does not reach kfake. The dialer way needs no
// broker change, works the same on kfake and on a real cluster, and keeps
// the test's own clients (feeder, tracker, read-back) off the faults. What
// it does not cover: a client that ignores its dialer option (every
// franz-go client onceflow builds takes WithKgoOpts).
//
// The proxy reads client-to-broker traffic as Kafka frames (a 4-byte size,
// then the request), so a fault can be triggered by a request's API key;
// broker-to-client traffic is copied as it comes. A blackhole holds what is
// in flight and delivers it when healed, as TCP's retransmissions would
// after a partition (a request may thus reach the broker long after its
// client gave up on it); a cut resets both sides of every connection.
//
// Written here rather than taken from Toxiproxy (github.com/Shopify/toxiproxy/v2,
// tried as a library): its toxics act on bytes, so no fault can wait for a
// Kafka request, and its timeout toxic drops the bytes it holds, leaving a
// torn Kafka stream on a connection that survives the heal.
type Net struct {
	t       testing.TB
	brokers []string

	mu      sync.Mutex
	ends    map[string]*End
	latency time.Duration // for every link, those of Ends to come too
	closed  bool
}

// NewNet returns a Net for the brokers (host:port as the cluster advertises
// them), closed with the test.
func NewNet(t testing.TB, brokers []string) *Net {
	n := &Net{t: t, brokers: slices.Clone(brokers), ends: make(map[string]*End)}
	t.Cleanup(n.Close)
	return n
}

// Brokers returns the brokers the Net proxies.
func (n *Net) Brokers() []string { return slices.Clone(n.brokers) }

// End returns the client side named name, creating its links (one
// listener per broker) on first use. A restarted process with the same
// name gets the same End, faults included.
func (n *Net) End(name string) *End {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e, ok := n.ends[name]; ok {
		return e
	}
	e := &End{name: name, links: make(map[string]*Link)}
	for _, b := range n.brokers {
		l, err := newLink(name, b, n.latency)
		if err != nil {
			n.t.Fatalf("kafkatest: proxy for %s to %s: %v", name, b, err)
		}
		e.links[b] = l
		e.order = append(e.order, b)
	}
	if n.closed {
		e.close()
	}
	n.ends[name] = e
	return e
}

// Ends returns every End made so far, by name.
func (n *Net) Ends() []*End {
	n.mu.Lock()
	defer n.mu.Unlock()
	var es []*End
	for _, e := range n.ends {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
	return es
}

// SetLatency sets the added latency of every link, those of Ends made
// later included (see Link.SetLatency).
func (n *Net) SetLatency(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.latency = d
	for _, e := range n.ends {
		e.SetLatency(d)
	}
}

// Close closes every listener and connection.
func (n *Net) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for _, e := range n.ends {
		e.close()
	}
}

// End is one client's side of the network: a link to every broker.
type End struct {
	name  string
	order []string
	links map[string]*Link
}

// Name returns the End's name.
func (e *End) Name() string { return e.name }

// Link returns the link to broker (host:port), nil for an unknown broker.
func (e *End) Link(broker string) *Link { return e.links[broker] }

// Links returns the End's links in the Net's broker order.
func (e *End) Links() []*Link {
	ls := make([]*Link, 0, len(e.order))
	for _, b := range e.order {
		ls = append(ls, e.links[b])
	}
	return ls
}

// DialMap returns "broker=proxy,..." for every link: what a worker process
// turns into its dialer (integration/worker -dial-map).
func (e *End) DialMap() string {
	var b strings.Builder
	for i, l := range e.Links() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.broker + "=" + l.Addr())
	}
	return b.String()
}

// Opt returns the client option that dials every broker through its link
// (plaintext; an address the Net does not know is dialled directly).
func (e *End) Opt() kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if l := e.links[host]; l != nil {
			host = l.Addr()
		}
		return d.DialContext(ctx, network, host)
	})
}

// SetLatency sets every link's added latency (see Link.SetLatency).
func (e *End) SetLatency(d time.Duration) {
	for _, l := range e.Links() {
		l.SetLatency(d)
	}
}

// Blackhole blackholes every link (see Link.Blackhole).
func (e *End) Blackhole() {
	for _, l := range e.Links() {
		l.Blackhole()
	}
}

// Cut cuts every link (see Link.Cut).
func (e *End) Cut() {
	for _, l := range e.Links() {
		l.Cut()
	}
}

// Heal ends every link's blackhole or cut.
func (e *End) Heal() {
	for _, l := range e.Links() {
		l.Heal()
	}
}

// ResetRandom resets one open connection of the End, drawn with rng, and
// returns its link's broker ("" when none is open).
func (e *End) ResetRandom(rng *rand.Rand) string {
	var all []*conn
	for _, l := range e.Links() {
		l.mu.Lock()
		for c := range l.conns {
			all = append(all, c)
		}
		l.mu.Unlock()
	}
	if len(all) == 0 {
		return ""
	}
	c := all[rng.IntN(len(all))]
	c.link.mu.Lock()
	c.link.resets++
	c.link.mu.Unlock()
	c.reset()
	return c.link.broker
}

// ArmOnRequest arms every link with a one-shot trigger: the first request
// with apiKey (and, when match is not nil, for which match returns true on
// its decoded request) that passes through any link of the End fires it.
// With forward the request is delivered first, so the broker acts on it;
// without, it is dropped. Then that link is blackholed for hold (its
// answer, if any, is held: the client cannot learn the outcome), every
// connection of the link is reset, and the link heals. fired is closed
// when the trigger fires, with the link it fired on (readable from
// Trigger.Link after that); the other links are disarmed.
func (e *End) ArmOnRequest(apiKey int16, match func(kmsg.Request) bool, forward bool, hold time.Duration) *Trigger {
	tr := &Trigger{apiKey: apiKey, match: match, forward: forward, hold: hold, fired: make(chan struct{}), healed: make(chan struct{})}
	for _, l := range e.Links() {
		l.mu.Lock()
		l.trigger = tr
		l.mu.Unlock()
	}
	return tr
}

func (e *End) close() {
	for _, l := range e.Links() {
		l.close()
	}
}

// Trigger is a fault armed to fire when a request passes (End.ArmOnRequest).
type Trigger struct {
	apiKey  int16
	match   func(kmsg.Request) bool
	forward bool
	hold    time.Duration

	once   sync.Once
	fired  chan struct{}
	healed chan struct{}
	link   *Link
	at     time.Time
	healAt time.Time
}

// Fired is closed when the trigger fires.
func (tr *Trigger) Fired() <-chan struct{} { return tr.fired }

// Healed is closed when the link the trigger fired on has healed.
func (tr *Trigger) Healed() <-chan struct{} { return tr.healed }

// Link returns the link the trigger fired on (after Fired).
func (tr *Trigger) Link() *Link { return tr.link }

// At returns when the trigger fired, and when its link healed (zero until then).
func (tr *Trigger) At() (fired, healed time.Time) {
	<-tr.fired
	tr.link.mu.Lock()
	defer tr.link.mu.Unlock()
	return tr.at, tr.healAt
}

// Link is the path from one client to one broker.
type Link struct {
	end    string
	broker string
	ln     net.Listener

	mu       sync.Mutex
	cond     *sync.Cond // signalled when held goes false or a conn closes
	latency  time.Duration
	held     bool // blackhole: nothing passes, connections hang
	cut      bool // connections reset, new ones refused
	closed   bool
	conns    map[*conn]struct{}
	trigger  *Trigger
	accepted int
	resets   int
}

func newLink(end, broker string, latency time.Duration) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{end: end, broker: broker, ln: ln, latency: latency, conns: make(map[*conn]struct{})}
	l.cond = sync.NewCond(&l.mu)
	go l.accept()
	return l, nil
}

// Broker returns the broker the link leads to.
func (l *Link) Broker() string { return l.broker }

// Addr returns the link's listening address.
func (l *Link) Addr() string { return l.ln.Addr().String() }

func (l *Link) String() string { return l.end + "->" + l.broker }

// Stats returns the connections accepted and reset so far.
func (l *Link) Stats() (accepted, resets int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted, l.resets
}

// SetLatency delays every request by d on its way to the broker (0: none):
// each round trip takes d longer. Requests keep their order; a connection
// does not wait for one request's delay before reading the next.
func (l *Link) SetLatency(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latency = d
}

// Blackhole makes the link hang: open connections pass nothing either way,
// new ones are accepted and hang, until Heal, which delivers what was held.
func (l *Link) Blackhole() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = true
}

// Cut resets every open connection and refuses new ones (accepted and reset
// at once) until Heal.
func (l *Link) Cut() {
	l.mu.Lock()
	l.cut = true
	conns := l.snapshotLocked()
	l.resets += len(conns)
	l.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
}

// ResetAll resets every open connection; new ones are accepted.
func (l *Link) ResetAll() int {
	l.mu.Lock()
	conns := l.snapshotLocked()
	l.resets += len(conns)
	l.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
	return len(conns)
}

// Heal ends a blackhole or a cut.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.cut = false, false
	l.cond.Broadcast()
}

func (l *Link) snapshotLocked() []*conn {
	cs := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		cs = append(cs, c)
	}
	return cs
}

func (l *Link) close() {
	l.mu.Lock()
	l.closed = true
	conns := l.snapshotLocked()
	l.cond.Broadcast()
	l.mu.Unlock()
	_ = l.ln.Close()
	for _, c := range conns {
		c.reset()
	}
}

func (l *Link) accept() {
	for {
		cc, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		cut, closed := l.cut, l.closed
		l.accepted++
		l.mu.Unlock()
		if cut || closed {
			resetConn(cc)
			continue
		}
		go l.serve(cc)
	}
}

// serve connects one client connection to the broker. While the link is
// blackholed it does not even dial: the client's connection hangs.
func (l *Link) serve(cc net.Conn) {
	c := &conn{link: l, client: cc, done: make(chan struct{})}
	l.mu.Lock()
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	defer c.reset()
	if !l.pass(c) {
		return
	}
	bc, err := net.DialTimeout("tcp", l.broker, 10*time.Second)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.broker = bc
	dead := c.dead
	c.mu.Unlock()
	if dead {
		resetConn(bc)
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { l.pipe(c, cc, bc, true) })
	wg.Go(func() { l.pipe(c, bc, cc, false) })
	wg.Wait()
}

// pass waits while the link is blackholed; false if c died meanwhile.
func (l *Link) pass(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.held && !c.isDead() && !l.closed {
		l.cond.Wait()
	}
	return !c.isDead() && !l.closed
}

// chunk is data read from one side with the time it was read.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst. Requests (toBroker) are read frame by frame and
// checked against the link's trigger; a reader goroutine timestamps each
// chunk so that latency delays every chunk by d from its arrival, not by d
// after the previous one left.
func (l *Link) pipe(c *conn, src, dst net.Conn, toBroker bool) {
	defer c.reset()
	ch := make(chan chunk, 256)
	go func() {
		defer close(ch)
		for {
			var b []byte
			var err error
			if toBroker {
				b, err = readFrame(src)
			} else {
				buf := make([]byte, 32<<10)
				var n int
				n, err = src.Read(buf)
				b = buf[:n]
			}
			if len(b) > 0 {
				select {
				case ch <- chunk{b, time.Now()}:
				case <-c.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for ck := range ch {
		if !l.pass(c) {
			return
		}
		if toBroker {
			if fire := l.check(ck.b); fire != nil {
				// Held before the request goes out, so that its
				// answer cannot slip through; the connection stays
				// open (a closed one might make the broker drop the
				// request) until the hold ends.
				l.fire(fire)
				if fire.forward {
					if _, err := dst.Write(ck.b); err != nil {
						return
					}
				}
				continue
			}
		}
		l.mu.Lock()
		lat := l.latency
		l.mu.Unlock()
		if toBroker && lat > 0 {
			if wait := time.Until(ck.at.Add(lat)); wait > 0 {
				select {
				case <-time.After(wait):
				case <-c.done:
					return
				}
			}
			if !l.pass(c) {
				return
			}
		}
		if _, err := dst.Write(ck.b); err != nil {
			return
		}
	}
}

// check returns the link's trigger if frame fires it, and disarms it on
// every link of the End.
func (l *Link) check(frame []byte) *Trigger {
	l.mu.Lock()
	tr := l.trigger
	l.mu.Unlock()
	if tr == nil || len(frame) < 6 || int16(binary.BigEndian.Uint16(frame[4:6])) != tr.apiKey {
		return nil
	}
	if tr.match != nil {
		req, err := decodeRequest(frame[4:])
		if err != nil || !tr.match(req) {
			return nil
		}
	}
	won := false
	tr.once.Do(func() { won = true })
	if !won {
		return nil
	}
	return tr
}

// fire blackholes the link for the trigger's hold, then resets its
// connections and heals it.
func (l *Link) fire(tr *Trigger) {
	l.mu.Lock()
	l.held = true
	l.trigger = nil
	tr.link, tr.at = l, time.Now()
	l.mu.Unlock()
	close(tr.fired)
	go func() {
		time.Sleep(tr.hold)
		l.ResetAll()
		l.mu.Lock()
		l.held = false
		tr.healAt = time.Now()
		l.cond.Broadcast()
		l.mu.Unlock()
		close(tr.healed)
	}()
}

// Disarm removes any trigger still armed on the link.
func (l *Link) Disarm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trigger = nil
}

// maxFrame bounds a request frame (Kafka's socket.request.max.bytes is 100 MiB).
const maxFrame = 100 << 20

func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return nil, fmt.Errorf("kafkatest: request frame of %d bytes", n)
	}
	b := make([]byte, 4+n)
	copy(b, size[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return b[:0], err
	}
	return b, nil
}

// decodeRequest decodes a request (without its size): the header (API key,
// version, correlation ID, client ID and, in a flexible request, tagged
// fields), then the body.
func decodeRequest(b []byte) (kmsg.Request, error) {
	if len(b) < 10 {
		return nil, errors.New("short request")
	}
	key, version := int16(binary.BigEndian.Uint16(b[0:2])), int16(binary.BigEndian.Uint16(b[2:4]))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, fmt.Errorf("unknown API key %d", key)
	}
	req.SetVersion(version)
	b = b[8:]
	idLen := int16(binary.BigEndian.Uint16(b[0:2]))
	b = b[2:]
	if idLen > 0 {
		if int(idLen) > len(b) {
			return nil, errors.New("short client ID")
		}
		b = b[idLen:]
	}
	if req.IsFlexible() {
		tags, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad tagged fields")
		}
		b = b[n:]
		for range tags {
			if _, n = binary.Uvarint(b); n <= 0 {
				return nil, errors.New("bad tag")
			}
			b = b[n:]
			size, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < size {
				return nil, errors.New("bad tag size")
			}
			b = b[n+int(size):]
		}
	}
	if err := req.ReadFrom(b); err != nil {
		return nil, err
	}
	return req, nil
}

// conn is one proxied connection.
type conn struct {
	link   *Link
	client net.Conn
	done   chan struct{}

	mu     sync.Mutex
	broker net.Conn
	dead   bool
}

func (c *conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// reset closes both sides with a TCP RST (no lingering FIN): what a
// client sees when a middlebox or a restarted peer drops the connection.
func (c *conn) reset() {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead = true
	bc := c.broker
	close(c.done)
	c.mu.Unlock()
	resetConn(c.client)
	if bc != nil {
		resetConn(bc)
	}
	l := c.link
	l.mu.Lock()
	delete(l.conns, c)
	l.cond.Broadcast()
	l.mu.Unlock()
}

func resetConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = nc.Close()
}
