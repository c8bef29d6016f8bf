package dedupe

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestOptionsValidate: Validate reads zero fields as their defaults, does
// not change its receiver, and rejects what Open rejects, with
// ErrInvalidOptions.
func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *Options
		want string // "" for valid
	}{
		{"nil", nil, ""},
		{"zero", &Options{}, ""},
		{"bucket as wide as the TTL", &Options{TTL: time.Hour, BucketWidth: time.Hour}, ""},
		{"bucket wider than the TTL", &Options{TTL: time.Minute, BucketWidth: time.Hour}, "BucketWidth"},
		{"bucket wider than the default TTL", &Options{BucketWidth: 8 * 24 * time.Hour}, "BucketWidth"},
		{"TTL below the default bucket", &Options{TTL: time.Minute}, "BucketWidth"},
		{"longest MaxIDLen", &Options{MaxIDLen: 64 << 10}, ""},
		{"MaxIDLen past the limit", &Options{MaxIDLen: 64<<10 + 1}, "MaxIDLen"},
	} {
		var before Options
		if tc.o != nil {
			before = *tc.o
		}
		err := tc.o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want ErrInvalidOptions naming %s", tc.name, err, tc.want)
		}
		if tc.o != nil && (*tc.o != before) {
			t.Errorf("%s: Validate changed its receiver to %+v", tc.name, *tc.o)
		}
		if tc.want != "" {
			o := *tc.o
			o.FS = vfs.NewMem()
			if s, err := Open("d", &o); !errors.Is(err, ErrInvalidOptions) {
				if s != nil {
					_ = s.Close()
				}
				t.Errorf("%s: Open: got %v, want ErrInvalidOptions", tc.name, err)
			}
		}
	}
}
