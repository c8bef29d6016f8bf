// Package sched runs keyed work on a pool of goroutines: the units of one
// session (one key) one at a time, in the order they were dispatched, and
// different sessions in parallel. A unit that asks to be retried backs
// off on a goroutine of its own, so that its session waits while the
// others go on. The pool grows while units block and shrinks when it is
// idle.
//
// It knows nothing of Kafka or of the processor: package processor
// dispatches fetched records with it, one session per record key.
package sched
