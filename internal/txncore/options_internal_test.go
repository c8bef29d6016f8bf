package txncore

import (
	"errors"
	"testing"
	"time"
)

// TestOptionsDefaults: zero durations take their defaults, set ones stay,
// and Validate and NewSession reject Options without their required
// fields.
func TestOptionsDefaults(t *testing.T) {
	got := (&Options{}).EnsureDefaults()
	if got.TransactionTimeout != 10*time.Second || got.SessionTimeout != 45*time.Second || got.RebalanceTimeout != 60*time.Second {
		t.Errorf("zero Options defaulted to %v, %v, %v", got.TransactionTimeout, got.SessionTimeout, got.RebalanceTimeout)
	}
	set := (&Options{TransactionTimeout: time.Second, SessionTimeout: 2 * time.Second, RebalanceTimeout: 3 * time.Second}).EnsureDefaults()
	if set.TransactionTimeout != time.Second || set.SessionTimeout != 2*time.Second || set.RebalanceTimeout != 3*time.Second {
		t.Errorf("set durations changed: %v, %v, %v", set.TransactionTimeout, set.SessionTimeout, set.RebalanceTimeout)
	}
	valid := Options{Brokers: []string{"127.0.0.1:1"}, Group: "g", InstanceID: "i", Topics: []string{"in"}}
	s, err := NewSession(valid)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for name, bad := range map[string]func(*Options){
		"Brokers":    func(c *Options) { c.Brokers = nil },
		"Group":      func(c *Options) { c.Group = "" },
		"InstanceID": func(c *Options) { c.InstanceID = "" },
		"Topics":     func(c *Options) { c.Topics = nil },
		"negative":   func(c *Options) { c.SessionTimeout = -time.Second },
	} {
		c := valid
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Validate: got %v, want ErrInvalidOptions", name, err)
		}
		if _, err := NewSession(c); !errors.Is(err, ErrInvalidOptions) || ClassOf(err) != 0 {
			t.Errorf("%s: got %v, want ErrInvalidOptions without a class", name, err)
		}
	}
}
