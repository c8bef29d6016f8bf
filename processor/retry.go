package processor

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy is the exponential backoff with jitter applied to transient
// handler errors, inside the record's session so later records of the
// session wait behind it. A record that exhausts it goes to the dead-letter
// topic with reason "retries-exhausted".
type RetryPolicy struct {
	Initial    time.Duration // first delay; default 100ms
	Max        time.Duration // delay cap; default 10s
	Multiplier float64       // growth per attempt; default 2
	Jitter     float64       // ± fraction of each delay, in [0,1]; default 0.2
	// MaxAttempts bounds handler calls per record (0: no bound).
	MaxAttempts int
	// MaxElapsed bounds the time from the first failure (0: no bound).
	// Default 1m when MaxAttempts is also 0.
	MaxElapsed time.Duration
}

// DefaultRetryPolicy returns the defaults described on RetryPolicy.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Minute}
}

func (p RetryPolicy) validate() error {
	switch {
	case p.Initial <= 0 || p.Max < p.Initial:
		return invalid("retry: need 0 < Initial <= Max, got Initial=%v Max=%v", p.Initial, p.Max)
	case p.Multiplier < 1:
		return invalid("retry: Multiplier must be >= 1, got %v", p.Multiplier)
	case p.Jitter < 0 || p.Jitter > 1:
		return invalid("retry: Jitter must be in [0,1], got %v", p.Jitter)
	case p.MaxAttempts < 0 || p.MaxElapsed < 0:
		return invalid("retry: MaxAttempts and MaxElapsed must not be negative")
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
