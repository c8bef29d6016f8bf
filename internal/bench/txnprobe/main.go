// Command txnprobe measures franz-go's transactional produce beside its
// idempotent produce on the same brokers, without onceflow: each mode in
// turn writes the same records to a fresh topic of -partitions partitions
// (RF 3), the transactional one in transactions of -txn-records. It is the
// decomposition behind docs/benchmarks.md's "Where the 300-partition gap
// is": what a transaction costs the produce path itself.
//
//	go run ./internal/bench/txnprobe -brokers B [-partitions 300] [-n 600000] [-rounds 2]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated brokers (required)")
	n := flag.Int("n", 600000, "records per run")
	parts := flag.Int("partitions", 300, "partitions of each run's topic")
	perTxn := flag.Int("txn-records", 75000, "records per transaction")
	rounds := flag.Int("rounds", 2, "idempotent and transactional runs, interleaved")
	flag.Parse()
	if *brokers == "" || *n <= 0 || *parts <= 0 || *perTxn <= 0 {
		fmt.Fprintln(os.Stderr, "txnprobe: -brokers is required; -n, -partitions and -txn-records must be positive")
		os.Exit(2)
	}
	if err := run(strings.Split(*brokers, ","), *n, *parts, *perTxn, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "txnprobe:", err)
		os.Exit(1)
	}
}

func run(seeds []string, n, parts, perTxn, rounds int) error {
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for r := range rounds {
		for _, txn := range []bool{false, true} {
			topic := fmt.Sprintf("txnprobe-%d-%t-%d", r, txn, time.Now().UnixNano())
			if _, err := adm.CreateTopic(ctx, int32(parts), 3, nil, topic); err != nil {
				return err
			}
			rate, err := produce(ctx, seeds, topic, txn, n, perTxn)
			if _, derr := adm.DeleteTopics(ctx, topic); err == nil {
				err = derr
			}
			if err != nil {
				return err
			}
			mode := "idempotent"
			if txn {
				mode = "transactional"
			}
			fmt.Printf("round %d %-13s %d records, %d partitions: %.0f rec/s\n", r+1, mode, n, parts, rate)
		}
	}
	return nil
}

// produce writes n records of 100 bytes, keyed over 1,000 keys, and
// returns the rate from the first record to the last acknowledgement.
func produce(ctx context.Context, seeds []string, topic string, txn bool, n, perTxn int) (float64, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic)}
	if txn {
		opts = append(opts, kgo.TransactionalID(topic))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	// The topic's partitions known to the client, and its producer ID
	// taken, before the clock starts.
	if txn {
		if err := cl.BeginTransaction(); err != nil {
			return 0, err
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		return 0, err
	}
	if txn {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return 0, err
		}
	}
	var mu sync.Mutex
	var firstErr error
	promise := func(_ *kgo.Record, err error) {
		mu.Lock()
		firstErr = errors.Join(firstErr, err)
		mu.Unlock()
	}
	val := make([]byte, 100)
	start := time.Now()
	for i := 0; i < n; {
		if txn {
			if err := cl.BeginTransaction(); err != nil {
				return 0, err
			}
		}
		for end := min(n, i+perTxn); i < end; i++ {
			cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 1000)), Value: val}, promise)
		}
		if err := cl.Flush(ctx); err != nil {
			return 0, err
		}
		if txn {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return 0, err
			}
		}
	}
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	return float64(n) / took.Seconds(), firstErr
}
