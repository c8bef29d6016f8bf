package txn

import "testing"

func TestHolderIsNewer(t *testing.T) {
	const inst = "w/1" // a '/' in the instance ID
	for _, tc := range []struct {
		name   string
		ours   int64
		holder string
		want   bool
	}{
		{"holder started later", 100, ClientID(inst, 200), true},
		{"holder started earlier: a zombie that came back", 200, ClientID(inst, 100), false},
		{"same incarnation", 100, ClientID(inst, 100), true},
		{"our incarnation unknown", 0, ClientID(inst, 100), true},
		{"user client ID", 200, "my-app", true},
		{"franz-go default client ID", 200, "kgo", true},
		{"another instance's client ID", 200, ClientID("w/2", 100), true},
		{"instance ID prefix only", 200, ClientID("w", 100), true},
		{"no incarnation", 200, "onceflow/w/1/", true},
		{"bad incarnation", 200, "onceflow/w/1/x", true},
		{"negative incarnation", 200, "onceflow/w/1/-5", true},
		{"no prefix", 200, "w/1/100", true},
	} {
		if got := holderIsNewer(tc.ours, inst, tc.holder); got != tc.want {
			t.Errorf("%s: holderIsNewer(%d, %q, %q) = %v, want %v", tc.name, tc.ours, inst, tc.holder, got, tc.want)
		}
	}
}

func TestClientIDRoundTrip(t *testing.T) {
	for _, inst := range []string{"x", "w/1", "a//b", ""} {
		if got := parseIncarnation(ClientID(inst, 1796001294251362325), inst); got != 1796001294251362325 {
			t.Errorf("instance %q: parsed %d", inst, got)
		}
	}
}
