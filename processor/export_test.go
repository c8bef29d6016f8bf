package processor

import "time"

// WithLagRefresh sets how often the lag gauge's end offsets are listed
// (lagRefreshInterval, 5s).
func WithLagRefresh(d time.Duration) Opt {
	return hooksOpt(func(h *testHooks) { h.lagRefresh = d })
}

// WithAfterEndTxnHook calls f after each committed transaction, before its
// n state writes reach the store; an error from f ends Run with it, so a
// test can crash the processor between EndTxn and the store batch.
func WithAfterEndTxnHook(f func(n int) error) Opt {
	return hooksOpt(func(h *testHooks) { h.afterEndTxn = f })
}

// WithRestoreApplyHook calls f after each batch of changelog records a
// restore applied to the store of an input partition; an error from f
// fails the restore and ends Run, so a test can crash the processor
// mid-restore, and a sleep in f makes a restore slow.
func WithRestoreApplyHook(f func(partition int32, records int) error) Opt {
	return hooksOpt(func(h *testHooks) { h.restoreApply = f })
}

// WithTopicWatchInterval sets how often Run asks whether the job's topics
// still exist (topicwatch.go's topicWatchInterval, 10s).
func WithTopicWatchInterval(d time.Duration) Opt {
	return hooksOpt(func(h *testHooks) { h.topicWatch = d })
}

// WithClaimRecheck sets how often an idle holder of the instance ID checks
// its claim (txncore.ClaimRecheck, 5s), so that a test can leave the
// checks at a join alone.
func WithClaimRecheck(d time.Duration) Opt {
	return hooksOpt(func(h *testHooks) { h.claimRecheck = d })
}

// WithHealthRecordBound sets Health.RecordBound: how long a record may be
// unfinished before the processor counts as not live.
func WithHealthRecordBound(d time.Duration) Opt {
	return hooksOpt(func(h *testHooks) { h.recordBound = d })
}
