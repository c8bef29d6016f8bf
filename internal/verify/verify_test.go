package verify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestChecker(t *testing.T) {
	at := time.Unix(0, 12345)
	c := NewChecker(5)
	c.Output(Observed{Session: "a", Payload: Payload{ID: 0, Seq: 0, ProducedAt: at}})
	c.Output(Observed{Session: "a", Payload: Payload{ID: 2, Seq: 2}})
	c.Output(Observed{Session: "a", Payload: Payload{ID: 1, Seq: 1}}) // out of order
	c.Output(Observed{Session: "b", Payload: Payload{ID: 3, Seq: 0}})
	c.Output(Observed{Session: "b", Payload: Payload{ID: 3, Seq: 0}}) // duplicate
	r := c.Report()
	require.Equal(t, Report{Inputs: 5, Outputs: 5, Duplicates: 1, Lost: 1, OrderViolations: 1}, r)
	require.False(t, r.ExactlyOnce())

	p, err := Decode(Append(nil, Payload{ID: 7, Seq: 3, ProducedAt: at}, 100))
	require.NoError(t, err)
	require.Equal(t, Payload{ID: 7, Seq: 3, ProducedAt: at}, p)
	_, err = Decode([]byte("short"))
	require.ErrorIs(t, err, ErrShortPayload)
}

// TestCheckerNames checks what a failed run's report names: the first
// duplicated input, where each of its copies was read, the first lost one.
func TestCheckerNames(t *testing.T) {
	c := NewChecker(4)
	_, ok := c.FirstDuplicate()
	require.False(t, ok)
	first := Copy{Topic: "out", Partition: 3, Offset: 10, ProducerID: 7, ProducerEpoch: 1}
	second := Copy{Topic: "out", Partition: 3, Offset: 90, ProducerID: 8, ProducerEpoch: 0}
	c.Watch(2)
	c.Output(Observed{Session: "a", Payload: Payload{ID: 2}, Where: first})
	c.Output(Observed{Session: "b", Payload: Payload{ID: 0}})
	c.Output(Observed{Session: "a", Payload: Payload{ID: 2, Seq: 0}, Where: second})
	c.DeadLetter(Observed{Session: "b", Payload: Payload{ID: 0}})
	id, ok := c.FirstDuplicate()
	require.True(t, ok)
	require.Equal(t, uint64(2), id)
	require.Equal(t, []Copy{first, second}, c.Copies())
	lost, ok := c.FirstLost()
	require.True(t, ok)
	require.Equal(t, uint64(1), lost)
	require.Equal(t, "out/3@90 (producer ID 8, epoch 0)", second.String())
}

// TestCheckerWhich: a FAIL's text names its records (issue 45): the first
// duplicate and where its second copy was read, the first lost input, the
// first output out of its session's order; only what is judged.
func TestCheckerWhich(t *testing.T) {
	clean := NewChecker(1)
	clean.Output(Observed{Session: "a", Payload: Payload{ID: 0}})
	require.Empty(t, clean.Which(true, true))
	c := NewChecker(4)
	second := Copy{Topic: "out", Partition: 1, Offset: 9, ProducerID: 8}
	late := Copy{Topic: "out", Partition: 0, Offset: 2, ProducerID: 7}
	c.Output(Observed{Session: "a", Payload: Payload{ID: 3, Seq: 1}})
	c.Output(Observed{Session: "a", Payload: Payload{ID: 0, Seq: 0}, Where: late})
	c.Output(Observed{Session: "b", Payload: Payload{ID: 2}})
	c.Output(Observed{Session: "b", Payload: Payload{ID: 2}, Where: second})
	require.Equal(t, "first duplicate: input 2, again at out/1@9 (producer ID 8, epoch 0); first lost: input 1; "+
		"first out of order: input 0 at out/0@2 (producer ID 7, epoch 0)", c.Which(true, true))
	require.Equal(t, "first lost: input 1", c.Which(false, false))
}
