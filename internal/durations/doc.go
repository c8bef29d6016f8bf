// Package durations keeps the distribution of a stream of durations (commit
// round trips) for its median, 99th percentile and exact maximum. The
// processor's Stats and eosbench's baselines share it, so that both report
// the same figures the same way.
package durations
