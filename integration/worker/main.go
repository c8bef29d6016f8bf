// Command worker runs one onceflow processor instance as its own OS process,
// for the process-level reliability suite in package integration (faults are
// injected with real signals: SIGKILL, SIGSTOP/SIGCONT, SIGTERM).
//
// The handler copies each input record to the output topic unchanged (same
// value; the key defaults to the input key, so a session's outputs stay in one
// output partition). With -poison-every N, records whose payload ID
// (internal/verify) is a multiple of N fail with processor.Permanent and go to
// the dead-letter topic.
//
// Signals: SIGTERM or SIGINT cancels Run, which finishes in-flight records,
// commits and returns; the process then exits 0. SIGQUIT is left to the Go
// runtime: it prints every goroutine's stack to stderr and exits 2. With
// -ready-fd N the worker closes descriptor N once SIGTERM and SIGINT stop it
// cleanly; before that they kill it.
//
// Exit codes: 0 clean stop; 1 Run failed (the error is on stderr); 2 bad
// flags or options; 3 fenced by a newer instance with the same instance ID
// (processor.ErrFenced).
//
// On exit the processor's counters are printed to stdout as one JSON object.
// Logs go to stderr (slog text, level -log-level, warn by default).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// Exit codes.
const (
	exitOK      = 0
	exitRunErr  = 1
	exitUsage   = 2
	exitFenced  = 3
	poisonError = "poison record"
)

// Result is what the worker prints to stdout when it exits.
type Result struct {
	Instance string          `json:"instance"`
	PID      int             `json:"pid"`
	Exit     int             `json:"exit"`
	Error    string          `json:"error,omitempty"`
	Uptime   string          `json:"uptime"`
	Stats    processor.Stats `json:"stats"`
}

type flags struct {
	brokers, group, instance, in, out, dlq string
	commitInterval, sessionTimeout         time.Duration
	rebalanceTimeout, txnTimeout           time.Duration
	drainTimeout, handlerLatency           time.Duration
	heartbeatInterval                      time.Duration
	poisonEvery                            uint64
	ordering, logLevel, kgoLogLevel        string
	maxVersion, groupProtocol              string
	stateDir, dialMap                      string
	positionGuard                          bool
	readyFD                                int
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.StringVar(&f.brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	fs.StringVar(&f.group, "group", "", "application name: consumer group and transactional ID prefix (required)")
	fs.StringVar(&f.instance, "instance", "", "stable instance ID: static member ID and transactional ID (required)")
	fs.StringVar(&f.in, "in", "", "comma-separated input topics (required)")
	fs.StringVar(&f.out, "out", "", "output topic (required)")
	fs.StringVar(&f.dlq, "dlq", "", "dead-letter topic (empty: none)")
	fs.DurationVar(&f.commitInterval, "commit-interval", 100*time.Millisecond, "transaction commit interval")
	fs.DurationVar(&f.sessionTimeout, "session-timeout", 6*time.Second, "group session timeout")
	fs.DurationVar(&f.heartbeatInterval, "heartbeat-interval", 0, "group heartbeat interval (0: a third of the session timeout; franz-go's own default is 3s, which a session timeout of 3s or less cannot survive)")
	fs.DurationVar(&f.rebalanceTimeout, "rebalance-timeout", 15*time.Second, "group rebalance timeout")
	fs.DurationVar(&f.txnTimeout, "txn-timeout", 10*time.Second, "transaction timeout")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 2*time.Second, "how long in-flight records may finish before a rebalance or shutdown commits")
	fs.DurationVar(&f.handlerLatency, "handler-latency", 0, "time the handler spends on each record")
	fs.Uint64Var(&f.poisonEvery, "poison-every", 0, "records whose payload ID is a multiple of N fail permanently (0: none)")
	fs.StringVar(&f.ordering, "ordering", "session", "ordering mode: session, partition or unordered")
	fs.StringVar(&f.logLevel, "log-level", "warn", "processor log level: debug, info, warn, error")
	fs.StringVar(&f.maxVersion, "max-kafka-version", "", "pin franz-go's request versions to a Kafka release (3.9, 4.0 … 4.4; empty: negotiate)")
	fs.StringVar(&f.groupProtocol, "group-protocol", "classic", "consumer group protocol: classic or consumer (KIP-848)")
	fs.StringVar(&f.kgoLogLevel, "kgo-log-level", "none", "franz-go client log level: none, error, warn, info, debug")
	fs.StringVar(&f.stateDir, "state-dir", "", "stateful mode: keep a per-session record count in a state store under a new directory in this one, and put the count before each record into its output's "+HeaderStateCount+" header (empty: stateless copy)")
	fs.BoolVar(&f.positionGuard, "position-guard", false, "processor.WithPositionGuard: keep the committed positions in a position log too and resume from it when the group serves an older one")
	fs.StringVar(&f.dialMap, "dial-map", "", "broker=proxy,...: dial each named broker address (bootstrap or advertised) at its proxy instead, through every client of the processor (the suite's network faults, internal/kafkatest.Net); other addresses are dialled directly")
	fs.IntVar(&f.readyFD, "ready-fd", 0, "an inherited descriptor the worker closes once SIGTERM and SIGINT stop it cleanly, so that a harness does not signal it before (0: none)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	switch {
	case f.group == "", f.instance == "", f.in == "", f.out == "":
		return f, errors.New("-group, -instance, -in and -out are required")
	case fs.NArg() > 0:
		return f, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return f, nil
}

func main() { os.Exit(run()) }

func run() int {
	f, err := parseFlags(os.Args[1:])
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "worker:", err)
		}
		return exitUsage
	}
	// Before anything slow: until here SIGTERM kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if f.readyFD > 0 {
		_ = os.NewFile(uintptr(f.readyFD), "ready").Close()
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "worker: -log-level:", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).
		With("instance", f.instance, "pid", os.Getpid())

	opts := []processor.Opt{
		processor.WithBrokers(split(f.brokers)...),
		processor.WithGroup(f.group),
		processor.WithInstanceID(f.instance),
		processor.WithInputTopics(split(f.in)...),
		processor.WithOutputTopic(f.out),
		processor.WithHandler(handler(f.handlerLatency, f.poisonEvery, f.stateDir != "")),
		processor.WithCommitInterval(f.commitInterval),
		processor.WithSessionTimeout(f.sessionTimeout),
		processor.WithGroupProtocol(processor.GroupProtocol(f.groupProtocol)),
		processor.WithRebalanceTimeout(f.rebalanceTimeout),
		processor.WithTransactionTimeout(f.txnTimeout),
		processor.WithDrainTimeout(f.drainTimeout),
		processor.WithLogger(log),
	}
	hb := f.heartbeatInterval
	if hb <= 0 {
		hb = f.sessionTimeout / 3
	}
	opts = append(opts, processor.WithKgoOpts(kgo.HeartbeatInterval(hb)))
	if f.dlq != "" {
		opts = append(opts, processor.WithDLQTopic(f.dlq))
	}
	switch f.ordering {
	case "session":
		opts = append(opts, processor.WithOrdering(processor.OrderBySession))
	case "partition":
		opts = append(opts, processor.WithOrdering(processor.OrderByPartition))
	case "unordered":
		opts = append(opts, processor.WithOrdering(processor.Unordered))
	default:
		fmt.Fprintf(os.Stderr, "worker: -ordering: unknown mode %q\n", f.ordering)
		return exitUsage
	}
	if kl, ok := kgoLevel(f.kgoLogLevel); !ok {
		fmt.Fprintf(os.Stderr, "worker: -kgo-log-level: unknown level %q\n", f.kgoLogLevel)
		return exitUsage
	} else if kl != kgo.LogLevelNone {
		prefix := func() string { return time.Now().Format("15:04:05.000 ") + f.instance + " kgo: " }
		opts = append(opts, processor.WithKgoOpts(kgo.WithLogger(kgo.BasicLogger(os.Stderr, kl, prefix))))
	}

	if f.dialMap != "" {
		via, err := parseDialMap(f.dialMap)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker: -dial-map:", err)
			return exitUsage
		}
		var d net.Dialer
		opts = append(opts, processor.WithKgoOpts(kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if p, ok := via[host]; ok {
				host = p
			}
			return d.DialContext(ctx, network, host)
		})))
	}

	if f.maxVersion != "" {
		v, ok := kafkaVersions[f.maxVersion]
		if !ok {
			fmt.Fprintf(os.Stderr, "worker: -max-kafka-version: unknown version %q\n", f.maxVersion)
			return exitUsage
		}
		opts = append(opts, processor.WithKgoOpts(kgo.MaxVersions(v())))
	}

	if f.stateDir != "" {
		// A fresh directory per process: a restarted instance rebuilds its
		// state from the changelog, as after losing its disk.
		dir, err := os.MkdirTemp(f.stateDir, f.instance+"-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker: -state-dir:", err)
			return exitUsage
		}
		defer os.RemoveAll(dir)
		opts = append(opts, processor.WithStateStore(dir, nil))
	}

	if f.positionGuard {
		opts = append(opts, processor.WithPositionGuard())
	}
	p, err := processor.New(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return exitUsage
	}

	started := time.Now()
	runErr := p.Run(ctx)

	res := Result{Instance: f.instance, PID: os.Getpid(), Uptime: time.Since(started).Round(time.Millisecond).String(), Stats: p.Stats()}
	switch {
	case runErr == nil:
		res.Exit = exitOK
	case errors.Is(runErr, processor.ErrFenced):
		res.Exit = exitFenced
	default:
		res.Exit = exitRunErr
	}
	if runErr != nil {
		res.Error = runErr.Error()
		fmt.Fprintf(os.Stderr, "worker %s: Run: %v\n", f.instance, runErr)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "worker: writing result:", err)
	}
	return res.Exit
}

// handler copies the input value to the default output topic (key: the
// input key), after latency, failing permanently on poison records.
// HeaderStateCount carries, in stateful mode, how many records of the
// output's session the state had counted before this one: with exactly-once
// state it equals the number of the session's outputs before it.
const HeaderStateCount = "onceflow-test-state-count"

func handler(latency time.Duration, poisonEvery uint64, stateful bool) processor.Handler {
	return func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if latency > 0 {
			t := time.NewTimer(latency)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if poisonEvery > 0 {
			pl, err := verify.Decode(r.Value)
			if err != nil {
				return processor.Permanent(err)
			}
			if pl.ID%poisonEvery == 0 {
				return processor.Permanent(fmt.Errorf("%s: id %d", poisonError, pl.ID))
			}
		}
		if !stateful {
			out.Emit(&kgo.Record{Value: r.Value})
			return nil
		}
		// Poison inputs returned above, before touching state: their
		// dead letters do not count.
		st := processor.StateFrom(ctx)
		v, _, err := st.Get(r.Key)
		if err != nil {
			return err
		}
		var n uint64
		if len(v) > 0 {
			if n, err = strconv.ParseUint(string(v), 10, 64); err != nil {
				return processor.Permanent(fmt.Errorf("state of %q: %w", r.Key, err))
			}
		}
		st.Set(r.Key, strconv.AppendUint(nil, n+1, 10))
		out.Emit(&kgo.Record{Value: r.Value, Headers: []kgo.RecordHeader{{Key: HeaderStateCount, Value: strconv.AppendUint(nil, n, 10)}}})
		return nil
	}
}

var kafkaVersions = map[string]func() *kversion.Versions{
	"3.9": kversion.V3_9_0, "4.0": kversion.V4_0_0, "4.1": kversion.V4_1_0,
	"4.2": kversion.V4_2_0, "4.3": kversion.V4_3_0, "4.4": kversion.V4_4_0,
}

func kgoLevel(s string) (kgo.LogLevel, bool) {
	switch strings.ToLower(s) {
	case "", "none":
		return kgo.LogLevelNone, true
	case "error":
		return kgo.LogLevelError, true
	case "warn":
		return kgo.LogLevelWarn, true
	case "info":
		return kgo.LogLevelInfo, true
	case "debug":
		return kgo.LogLevelDebug, true
	}
	return kgo.LogLevelNone, false
}

// parseDialMap parses -dial-map's "broker=proxy,..." list.
func parseDialMap(s string) (map[string]string, error) {
	m := make(map[string]string)
	for _, kv := range split(s) {
		b, p, ok := strings.Cut(kv, "=")
		if !ok || b == "" || p == "" {
			return nil, fmt.Errorf("%q: want broker=proxy", kv)
		}
		m[b] = p
	}
	return m, nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
