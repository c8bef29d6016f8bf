// Package integration holds the process-level reliability suite: real
// onceflow worker processes (integration/worker) copy an input topic to an
// output topic while the tests SIGKILL, SIGSTOP/SIGCONT and SIGTERM them, and
// (against a real broker) hard-kill and restart the broker; the output read
// back read_committed must hold every input exactly once, or its
// dead-letter copy, and each session's outputs in input order. See
// docs/reliability.md.
package integration
