package processor

import "time"

// testHooks let tests crash the processor at points no fault injection
// reaches, or leave out a check to test another alone. They are not configuration: tests pass them to New as hook
// options (hooksOpt, made in export_test.go), New keeps them on the
// Processor, apart from config, and the loop reads them from there. Each
// Processor has its own, so tests running in parallel do not share them.
// Zero in production: each costs one nil check.
type testHooks struct {
	// afterEndTxn runs after a transaction committed and before its state
	// writes (n of them) are applied to the store; an error ends Run.
	afterEndTxn func(n int) error
	// restoreApply runs after each batch a restore applied to the store
	// of an input partition, with the batch's records; an error fails the
	// restore (and Run).
	restoreApply func(partition int32, records int) error
	// claimRecheck, if set, replaces txncore.ClaimRecheck.
	claimRecheck time.Duration
	// topicWatch, if set, replaces topicWatchInterval (topicwatch.go).
	topicWatch time.Duration
	// lagRefresh, if set, replaces lagRefreshInterval (metrics.go).
	lagRefresh time.Duration
	// txnBudget, if set, fixes each transaction's budget at this many
	// bytes (txnbudget.go).
	txnBudget int64
}

// hooksOpt is an Opt that sets test hooks rather than configuration.
type hooksOpt func(*testHooks)

func (hooksOpt) apply(*config) {}

// hooksOf collects the test hooks that opts set.
func hooksOf(opts []Opt) testHooks {
	var h testHooks
	for _, o := range opts {
		if ho, ok := o.(hooksOpt); ok {
			ho(&h)
		}
	}
	return h
}
