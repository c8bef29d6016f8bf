package processor

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy is the exponential backoff with jitter applied to transient
// handler errors, inside the record's session so later records of the
// session wait behind it. A record that exhausts it goes to the dead-letter
// topic with reason "retries-exhausted".
//
// A zero field takes its default, so the zero RetryPolicy is
// DefaultRetryPolicy(), and RetryPolicy{MaxAttempts: 5} is the default
// backoff for at most 5 attempts. The backoff is the Java client's (KIP-580): the
// delay before attempt n+1 is Initial·Multiplier^(n-1), capped at Max, each
// delay varied by ±Jitter.
type RetryPolicy struct {
	// Initial is the first delay, as the Java client's retry.backoff.ms.
	// Must not be negative. Default 100ms (the Java default too).
	Initial time.Duration
	// Max caps the delay, as the Java client's retry.backoff.max.ms
	// (whose default is 1s). Must not be negative or, once defaulted,
	// shorter than Initial. Default 10s, or Initial if that is longer.
	Max time.Duration
	// Multiplier is the growth of the delay per attempt, at least 1 (1:
	// a constant delay). Default 2, the Java client's fixed factor.
	Multiplier float64
	// Jitter varies each delay by up to ± this fraction of it, at most 1.
	// Negative: no jitter. Default 0.2, the Java client's fixed jitter.
	Jitter float64
	// MaxAttempts bounds the handler calls per record; negative: no bound.
	// Kafka Streams does not retry a failing processor, so nothing there
	// corresponds. Default: no bound.
	MaxAttempts int
	// MaxElapsed bounds the time from a record's first failure; negative:
	// no bound. As Kafka Streams' task.timeout.ms (default 5 minutes), a
	// bound on time rather than attempts. Default 1m, or no bound when a
	// positive MaxAttempts bounds the attempts instead. With MaxElapsed
	// negative and MaxAttempts not positive, a record is retried until its
	// handler succeeds or returns a permanent error.
	MaxElapsed time.Duration
}

// Defaults of RetryPolicy's fields.
const (
	defaultRetryInitial    = 100 * time.Millisecond
	defaultRetryMax        = 10 * time.Second
	defaultRetryMultiplier = 2
	defaultRetryJitter     = 0.2
	defaultRetryMaxElapsed = time.Minute
)

// DefaultRetryPolicy returns the defaults described on RetryPolicy:
// 100ms doubling up to 10s, ±20% jitter, for at most a minute.
func DefaultRetryPolicy() RetryPolicy { return RetryPolicy{}.resolved() }

// resolved returns p with its zero fields defaulted, in the form delay and
// exhausted read: there a zero Jitter, MaxAttempts or MaxElapsed means
// none, so negatives (none, for the user) become zero.
func (p RetryPolicy) resolved() RetryPolicy {
	if p.Initial == 0 {
		p.Initial = defaultRetryInitial
	}
	if p.Max == 0 {
		p.Max = max(defaultRetryMax, p.Initial)
	}
	if p.Multiplier == 0 {
		p.Multiplier = defaultRetryMultiplier
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = defaultRetryJitter
	case p.Jitter < 0:
		p.Jitter = 0
	}
	if p.MaxElapsed == 0 && p.MaxAttempts <= 0 {
		p.MaxElapsed = defaultRetryMaxElapsed
	}
	p.MaxAttempts = max(p.MaxAttempts, 0)
	p.MaxElapsed = max(p.MaxElapsed, 0)
	return p
}

// validate checks a resolved policy.
func (p RetryPolicy) validate() error {
	switch {
	case p.Initial <= 0 || p.Max < p.Initial:
		return invalid("WithRetryPolicy: Initial must not be negative nor longer than Max, got Initial=%v Max=%v", p.Initial, p.Max)
	case !(p.Multiplier >= 1): // NaN too
		return invalid("WithRetryPolicy: Multiplier must be >= 1, got %v", p.Multiplier)
	case !(p.Jitter <= 1): // NaN too
		return invalid("WithRetryPolicy: Jitter must be at most 1, got %v", p.Jitter)
	}
	return nil
}

// delay returns the wait before attempt number attempt+1 (attempt >= 1).
func (p RetryPolicy) delay(attempt int) time.Duration {
	d := float64(p.Initial)
	for i := 1; i < attempt && d < float64(p.Max); i++ {
		d *= p.Multiplier
	}
	d = min(d, float64(p.Max))
	if p.Jitter > 0 {
		d *= 1 + p.Jitter*(2*rand.Float64()-1)
	}
	return time.Duration(d)
}

// exhausted reports whether no further attempt is allowed.
func (p RetryPolicy) exhausted(attempts int, sinceFirstFailure time.Duration) bool {
	return (p.MaxAttempts > 0 && attempts >= p.MaxAttempts) ||
		(p.MaxElapsed > 0 && sinceFirstFailure >= p.MaxElapsed)
}
