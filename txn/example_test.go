package txn_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/txn"
)

// A loop of your own on a Session: poll, produce in a transaction, commit
// the outputs with the input offsets, and recover from each error class.
// It turns three orders into receipts on an in-process cluster, then reads
// the receipts back read_committed.
func Example() {
	cluster, err := kfake.NewCluster(kfake.SeedTopics(1, "orders", "receipts"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx := context.Background()

	in, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"))
	in.ProduceSync(ctx,
		&kgo.Record{Value: []byte("order 1")},
		&kgo.Record{Value: []byte("order 2")},
		&kgo.Record{Value: []byte("order 3")},
	)
	in.Close()

	cfg := txn.Options{
		Brokers:     brokers,
		Group:       "receipts",
		InstanceID:  "instance-1", // stable across restarts
		Topics:      []string{"orders"},
		Incarnation: time.Now().UnixNano(), // once per process
	}
	fmt.Println("transactional ID:", txn.ID(cfg.Group, cfg.InstanceID))
	s, err := txn.NewSession(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { s.Close() }()
	for done := 0; done < 3; {
		n, err := step(ctx, s)
		switch {
		case errors.Is(err, txn.ErrFenced):
			fmt.Println("a newer instance took over:", err)
			return
		case err != nil:
			// ClassReset or ClassOutcomeUnknown: a new Session resumes
			// from the committed offsets.
			s.Close()
			if s, err = txn.NewSession(cfg); err != nil {
				fmt.Println(err)
				return
			}
		}
		done += n
	}

	// What a read_committed consumer sees, and the group's offset, which
	// moved in the same transactions.
	rd, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("receipts"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer rd.Close()
	for seen := 0; seen < 3; {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			seen++
			fmt.Println(string(r.Value))
		})
	}
	offsets, _ := kadm.NewClient(rd).FetchOffsets(ctx, "receipts")
	o, _ := offsets.Lookup("orders", 0)
	fmt.Println("committed offset of orders/0:", o.At)
	// Output:
	// transactional ID: receipts/instance-1
	// RECEIPT FOR ORDER 1
	// RECEIPT FOR ORDER 2
	// RECEIPT FOR ORDER 3
	// committed offset of orders/0: 3
}

// step runs one transaction: the records of one poll, each turned into a
// receipt, committed with the offsets after them. It returns how many
// records it committed; an error is a *txn.Error whose class says what to
// do.
func step(ctx context.Context, s *txn.Session) (int, error) {
	fs := s.Poll(ctx, 100)
	defer s.AllowRebalance() // after the commit or abort below
	var pollErr error
	fs.EachError(func(_ string, _ int32, err error) { pollErr = err })
	if pollErr != nil {
		return 0, s.CheckFenced(ctx, "poll", pollErr)
	}
	if fs.Empty() {
		return 0, nil
	}
	tx, err := s.Begin()
	if err != nil {
		return 0, err
	}
	var produceErr error
	fs.EachRecord(func(r *kgo.Record) {
		receipt := &kgo.Record{Topic: "receipts", Key: r.Key, Value: []byte("RECEIPT FOR " + strings.ToUpper(string(r.Value)))}
		tx.Produce(ctx, receipt, func(_ *kgo.Record, err error) {
			if err != nil {
				produceErr = err // promises run one at a time
			}
		})
	})
	if err := tx.Flush(ctx); err != nil { // every promise has run after it
		return 0, tx.FlushFailed(ctx, err)
	}
	if produceErr != nil {
		// A failed record dooms the transaction: abort it, then ask
		// whether this Session can go on.
		if err := tx.Abort(ctx); err != nil {
			return 0, err
		}
		s.Rewind()
		if e := s.CheckFenced(ctx, "produce", produceErr); e.Class != txn.ClassAbortable {
			return 0, e
		}
		return 0, nil // the records come again
	}
	committed, err := tx.Commit(ctx, nil)
	if !committed {
		if err == nil {
			s.Rewind() // a rebalance aborted it: the records come again
		}
		return 0, err
	}
	return fs.NumRecords(), nil
}
