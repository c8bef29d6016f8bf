package processor

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRetryPolicyDefaults: every zero field of a RetryPolicy takes its
// default, negatives mean "none" where RetryPolicy says so, and what is
// set stays as set.
func TestRetryPolicyDefaults(t *testing.T) {
	def := RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Minute}
	for _, tc := range []struct {
		name string
		in   RetryPolicy
		want RetryPolicy
	}{
		{"zero", RetryPolicy{}, def},
		{"Initial only", RetryPolicy{Initial: time.Second},
			RetryPolicy{Initial: time.Second, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Minute}},
		{"Initial past the default Max", RetryPolicy{Initial: time.Minute},
			RetryPolicy{Initial: time.Minute, Max: time.Minute, Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Minute}},
		{"Max only", RetryPolicy{Max: time.Second},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Minute}},
		{"Multiplier only", RetryPolicy{Multiplier: 1},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 1, Jitter: 0.2, MaxElapsed: time.Minute}},
		{"Jitter set", RetryPolicy{Jitter: 0.5},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.5, MaxElapsed: time.Minute}},
		{"no jitter", RetryPolicy{Jitter: -1},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0, MaxElapsed: time.Minute}},
		{"MaxAttempts bounds instead of MaxElapsed", RetryPolicy{MaxAttempts: 5},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.2, MaxAttempts: 5}},
		{"no attempts bound keeps the time bound", RetryPolicy{MaxAttempts: -1}, def},
		{"MaxElapsed set", RetryPolicy{MaxElapsed: time.Hour},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Hour}},
		{"both bounds", RetryPolicy{MaxAttempts: 3, MaxElapsed: time.Second},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.2, MaxAttempts: 3, MaxElapsed: time.Second}},
		{"no time bound", RetryPolicy{MaxElapsed: -1},
			RetryPolicy{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 2, Jitter: 0.2}},
		{"every field set", RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, Multiplier: 3, Jitter: 1, MaxAttempts: 7, MaxElapsed: time.Second},
			RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, Multiplier: 3, Jitter: 1, MaxAttempts: 7, MaxElapsed: time.Second}},
	} {
		got := tc.in.resolved()
		if got != tc.want {
			t.Errorf("%s: %+v resolved to %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
		if err := got.validate(); err != nil {
			t.Errorf("%s: %+v: %v", tc.name, tc.in, err)
		}
	}
	if got := DefaultRetryPolicy(); got != def {
		t.Errorf("DefaultRetryPolicy() = %+v, want %+v", got, def)
	}
	var c config
	WithRetryPolicy(RetryPolicy{MaxAttempts: 2}).apply(&c)
	if c.retry.exhausted(1, time.Hour) || !c.retry.exhausted(2, 0) {
		t.Errorf("RetryPolicy{MaxAttempts: 2} through WithRetryPolicy: %+v", c.retry)
	}
	WithRetryPolicy(RetryPolicy{}).apply(&c)
	if c.retry.exhausted(1_000_000, time.Minute-1) || !c.retry.exhausted(1, time.Minute) {
		t.Errorf("the zero RetryPolicy through WithRetryPolicy: %+v", c.retry)
	}
	if d := c.retry.delay(1); d < 80*time.Millisecond || d > 120*time.Millisecond {
		t.Errorf("the zero RetryPolicy's first delay is %v, want 100ms ±20%%", d)
	}
}

// TestRetryPolicyInvalid: what defaults cannot fix is an invalid option.
func TestRetryPolicyInvalid(t *testing.T) {
	for _, tc := range []struct {
		in   RetryPolicy
		want string
	}{
		{RetryPolicy{Initial: -time.Millisecond}, "Initial"},
		{RetryPolicy{Max: -time.Millisecond}, "Initial"},
		{RetryPolicy{Initial: time.Second, Max: time.Millisecond}, "Initial"},
		{RetryPolicy{Multiplier: 0.5}, "Multiplier"},
		{RetryPolicy{Multiplier: -2}, "Multiplier"},
		{RetryPolicy{Multiplier: math.NaN()}, "Multiplier"},
		{RetryPolicy{Jitter: 1.5}, "Jitter"},
		{RetryPolicy{Jitter: math.NaN()}, "Jitter"},
	} {
		err := tc.in.resolved().validate()
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: got %v, want ErrInvalidOption", tc.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v does not name %s", tc.in, err, tc.want)
		}
	}
}
