// Package bench runs eosbench's measurements.
//
// A run produces a verifiable input (internal/verify payloads, keyed by
// session), runs consume-transform-produce pipelines over it and judges
// them the way the tests do. The pipelines are a plain franz-go
// at-least-once pipe (the ceiling), franz-go's GroupTransactSession loop
// (the plain Go exactly-once baseline) and onceflow's processor in its
// ordering modes. Each runs in-process, or as subprocess workers that can
// be killed with SIGKILL and restarted under the same instance ID.
//
// While a pipeline runs, a read_committed consumer started before it
// timestamps every output as it becomes visible, which gives the latency
// histogram and the end of the run (every input accounted for). The
// verdict itself comes from a fresh read_committed read-back after the
// pipeline stopped, checked by verify.Checker, so that duplicates committed
// late are counted too.
package bench
