package verify

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecode: any record value either decodes to a payload that encodes
// back to its first PayloadLen bytes, or is ErrShortPayload.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			require.ErrorIs(t, err, ErrShortPayload)
			require.Less(t, len(b), PayloadLen)
			return
		}
		require.True(t, bytes.Equal(b[:PayloadLen], Append(nil, p, PayloadLen)))
	})
}

// FuzzChecker feeds a checker arbitrary committed records (each: a
// session byte, an output/dead-letter byte, a value) as read from untrusted
// topics: it never panics and its counts always add up.
func FuzzChecker(f *testing.F) {
	f.Fuzz(func(t *testing.T, inputs uint8, stream []byte) {
		c := NewChecker(int(inputs))
		var outputs, dlq, short, outOfRange int
		distinct := map[uint64]bool{}
		const rec = 2 + PayloadLen
		for ; len(stream) >= 2; stream = stream[min(len(stream), rec):] {
			v := stream[2:min(len(stream), rec)]
			p, err := Decode(v)
			if err != nil {
				c.Malformed()
				short++
				continue
			}
			o := Observed{Session: string(stream[:1]), Payload: p}
			if stream[1]%2 == 0 {
				c.Output(o)
				outputs++
			} else {
				c.DeadLetter(o)
				dlq++
			}
			if p.ID < uint64(inputs) {
				distinct[p.ID] = true
			} else {
				outOfRange++
			}
		}
		r := c.Report()
		require.Equal(t, int(inputs), r.Inputs)
		require.Equal(t, outputs, r.Outputs)
		require.Equal(t, dlq, r.DLQ)
		require.Equal(t, short+outOfRange, r.Malformed)
		require.Equal(t, int(inputs)-len(distinct), r.Lost)
		require.Equal(t, outputs+dlq, len(distinct)+r.Duplicates+outOfRange, "every record is first, a duplicate or out of range")
		require.LessOrEqual(t, r.OrderViolations, outputs)
		if r.ExactlyOnce() {
			require.Zero(t, r.Lost+r.Duplicates+r.Malformed)
		}
	})
}
