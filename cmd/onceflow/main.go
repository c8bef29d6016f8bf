package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/clientsec"
	"github.com/onceflow/onceflow/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	status := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command failed, or found problems (corrupt metadata)
	exitUsage = 2
)

// run is the whole program minus the process: tests call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "describe":
		return runDescribe(ctx, rest, stdout, stderr)
	case "reset":
		return runReset(ctx, rest, stdout, stderr)
	case "dedupe", "state":
		if len(rest) == 0 || rest[0] != "inspect" {
			fmt.Fprintf(stderr, "onceflow: usage: onceflow %s inspect [flags] DIR\n", cmd)
			return exitUsage
		}
		if cmd == "dedupe" {
			return runDedupeInspect(rest[1:], stdout, stderr)
		}
		return runStateInspect(rest[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.Current("onceflow"))
		return exitOK
	}
	fmt.Fprintf(stderr, "onceflow: unknown command %q\n", cmd)
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: onceflow <command> [flags]

commands:
  describe          a group's input partitions (committed offset, finished records above it,
                    lag to the last stable offset, owner) and its instances' transactions
  reset             move a stopped group's committed offsets (earliest, latest, a time or an
                    offset) and clear its finished-records maps; asks for -yes
  dedupe inspect DIR  a stopped instance's dedupe store (WithDedupe), read-only
  state inspect DIR   a stopped instance's state store (WithStateStore), read-only
  version           the module version go install built (or (devel)) and the VCS
                    revision if stamped; also -version

Run "onceflow <command> -h" for a command's flags.
`)
}

// clusterFlags are the flags of the commands that talk to Kafka.
type clusterFlags struct {
	brokers string
	group   string
	json    bool
	timeout time.Duration
	sec     clientsec.Config
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "the cluster's seed brokers (comma-separated `host:port` list)")
	fs.StringVar(&c.group, "group", "", "the application's group (processor.WithGroup); required")
	fs.BoolVar(&c.json, "json", false, "print one JSON object instead of tables")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up on unreachable brokers, and on the whole command, after this `duration`")
	c.sec.RegisterFlags(fs)
}

// parse parses args into fs; !ok means stop with status (-h, bad flags).
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (positional []string, status int, ok bool) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK, false
		}
		return nil, exitUsage, false
	}
	return fs.Args(), exitOK, true
}

// Errors the commands report; each message says what to do.
var (
	errUnreachable   = errors.New("cannot reach the brokers")
	errRefused       = errors.New("the brokers refused the connection or its credentials")
	errUnknownGroup  = errors.New("unknown group")
	errActiveMembers = errors.New("the group has active members")
	errProblems      = errors.New("problems found")
)

// connect opens an admin client and checks that the brokers answer: an
// unreachable cluster or refused credentials fail here, with the reason,
// within the timeout, rather than in the first of many requests.
func (c *clusterFlags) connect(ctx context.Context) (admin, func(), error) {
	opts, err := c.sec.WithPasswordFromEnv().Opts()
	if err != nil {
		return admin{}, nil, err
	}
	brokers := strings.Split(c.brokers, ",")
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return admin{}, nil, err
	}
	if err := clientsec.Probe(ctx, cl, 500*time.Millisecond); err != nil {
		cl.Close()
		if clientsec.IsAuthError(err) {
			return admin{}, nil, fmt.Errorf("%w (%s): %v; check -tls*, -sasl-* and the listener", errRefused, c.brokers, err)
		}
		return admin{}, nil, fmt.Errorf("%w %s within %v: %v", errUnreachable, c.brokers, c.timeout, err)
	}
	return admin{kadm.NewClient(cl), cl}, cl.Close, nil
}

// admin is an admin client and the client under it, for the requests
// kadm does not wrap as needed.
type admin struct {
	*kadm.Client
	cl *kgo.Client
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fail prints err and returns exitFail.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "onceflow:", err)
	return exitFail
}

func runDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("onceflow describe", flag.ContinueOnError)
	var c clusterFlags
	c.register(fs)
	topics := fs.String("topics", "", "input `topics` to show beside those the group committed offsets for or is assigned (comma-separated)")
	if _, st, ok := parse(fs, args, stderr); !ok {
		return st
	}
	if c.group == "" {
		fmt.Fprintln(stderr, "onceflow describe: -group is required")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	adm, closeFn, err := c.connect(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	defer closeFn()
	var extra []string
	if *topics != "" {
		extra = strings.Split(*topics, ",")
	}
	d, err := describe(ctx, adm, c.group, extra, time.Now())
	if err != nil {
		return fail(stderr, err)
	}
	if c.json {
		err = printJSON(stdout, d)
	} else {
		err = printDescription(stdout, d)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if len(d.Problems) > 0 {
		return fail(stderr, fmt.Errorf("%w: %s", errProblems, strings.Join(d.Problems, "; ")))
	}
	return exitOK
}
