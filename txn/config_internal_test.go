package txn

import (
	"errors"
	"testing"
	"time"
)

// TestConfigDefaults: zero durations take their defaults, set ones stay,
// and NewSession rejects a Config without its required fields.
func TestConfigDefaults(t *testing.T) {
	got := Config{}.withDefaults()
	if got.TransactionTimeout != 10*time.Second || got.SessionTimeout != 45*time.Second || got.RebalanceTimeout != 60*time.Second {
		t.Errorf("zero Config defaulted to %v, %v, %v", got.TransactionTimeout, got.SessionTimeout, got.RebalanceTimeout)
	}
	set := Config{TransactionTimeout: time.Second, SessionTimeout: 2 * time.Second, RebalanceTimeout: 3 * time.Second}.withDefaults()
	if set.TransactionTimeout != time.Second || set.SessionTimeout != 2*time.Second || set.RebalanceTimeout != 3*time.Second {
		t.Errorf("set durations changed: %v, %v, %v", set.TransactionTimeout, set.SessionTimeout, set.RebalanceTimeout)
	}
	valid := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", InstanceID: "i", Topics: []string{"in"}}
	s, err := NewSession(valid)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for name, bad := range map[string]func(*Config){
		"Brokers":    func(c *Config) { c.Brokers = nil },
		"Group":      func(c *Config) { c.Group = "" },
		"InstanceID": func(c *Config) { c.InstanceID = "" },
		"Topics":     func(c *Config) { c.Topics = nil },
		"negative":   func(c *Config) { c.SessionTimeout = -time.Second },
	} {
		c := valid
		bad(&c)
		if _, err := NewSession(c); !errors.Is(err, ErrInvalidConfig) || ClassOf(err) != 0 {
			t.Errorf("%s: got %v, want ErrInvalidConfig without a class", name, err)
		}
	}
}
