package verify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestChecker(t *testing.T) {
	at := time.Unix(0, 12345)
	c := NewChecker(5)
	c.Output(Observed{"a", Payload{ID: 0, Seq: 0, ProducedAt: at}})
	c.Output(Observed{"a", Payload{ID: 2, Seq: 2}})
	c.Output(Observed{"a", Payload{ID: 1, Seq: 1}}) // out of order
	c.Output(Observed{"b", Payload{ID: 3, Seq: 0}})
	c.Output(Observed{"b", Payload{ID: 3, Seq: 0}}) // duplicate
	r := c.Report()
	require.Equal(t, Report{Inputs: 5, Outputs: 5, Duplicates: 1, Lost: 1, OrderViolations: 1}, r)
	require.False(t, r.ExactlyOnce())

	p, err := Decode(Append(nil, Payload{ID: 7, Seq: 3, ProducedAt: at}, 100))
	require.NoError(t, err)
	require.Equal(t, Payload{ID: 7, Seq: 3, ProducedAt: at}, p)
	_, err = Decode([]byte("short"))
	require.ErrorIs(t, err, ErrShortPayload)
}
