package txncore

import (
	"testing"
	"time"
)

func TestLostGrace(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	const grace = 6 * time.Second
	for _, tc := range []struct {
		name  string
		began bool
		ended bool
		after time.Duration // from the begin to the rebuild
		want  time.Duration
	}{
		{name: "no lost member", want: grace},
		{name: "cut short at once", began: true, want: grace},
		{name: "cut short after 2s", began: true, after: 2 * time.Second, want: grace - 2*time.Second},
		{name: "cut short after the grace", began: true, after: 10 * time.Second, want: 0},
		{name: "ran its course", began: true, ended: true, after: 10 * time.Second, want: grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g lostGrace
			if tc.began {
				g.begin(t0)
			}
			if tc.ended {
				g.end()
			}
			if got := g.left(t0.Add(tc.after), grace); got != tc.want {
				t.Errorf("left: %v, want %v", got, tc.want)
			}
		})
	}
}
