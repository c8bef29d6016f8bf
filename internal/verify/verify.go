// Package verify checks a pipeline's committed output against its input:
// every input exactly once in the output (or accounted for in the
// dead-letter topic), and each session's outputs in input order. It is
// shared by eosbench and the tests, so both judge runs the same way.
package verify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PayloadLen is the size of the fields a payload starts with; the rest of
// a record's value is padding.
const PayloadLen = 24

// Payload identifies one input record.
type Payload struct {
	ID         uint64    // unique across the input, 0..n-1
	Seq        uint64    // position within its session, from 0
	ProducedAt time.Time // when the input was produced
}

// ErrShortPayload means a value is too short to hold a payload.
var ErrShortPayload = errors.New("verify: value shorter than a payload")

// Append appends p padded to size bytes (at least PayloadLen).
func Append(dst []byte, p Payload, size int) []byte {
	dst = binary.BigEndian.AppendUint64(dst, p.ID)
	dst = binary.BigEndian.AppendUint64(dst, p.Seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(p.ProducedAt.UnixNano()))
	for i := PayloadLen; i < size; i++ {
		dst = append(dst, byte('a'+i%26))
	}
	return dst
}

// Decode reads a payload from the start of b.
func Decode(b []byte) (Payload, error) {
	if len(b) < PayloadLen {
		return Payload{}, fmt.Errorf("%w: %d bytes", ErrShortPayload, len(b))
	}
	return Payload{
		ID:         binary.BigEndian.Uint64(b),
		Seq:        binary.BigEndian.Uint64(b[8:]),
		ProducedAt: time.Unix(0, int64(binary.BigEndian.Uint64(b[16:]))),
	}, nil
}

// Observed is one committed output or dead-letter record, in the order its
// partition holds it.
type Observed struct {
	Session string
	Payload Payload
	Where   Copy // where it was read; optional, for Checker.Watch
}

// Copy is where an output or dead-letter record sits and which
// transaction wrote it: what a failed run's report names, so that the
// copies of a duplicated input can be found and read again.
type Copy struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Offset        int64  `json:"offset"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
}

func (c Copy) String() string {
	return fmt.Sprintf("%s/%d@%d (producer ID %d, epoch %d)", c.Topic, c.Partition, c.Offset, c.ProducerID, c.ProducerEpoch)
}

// Report is the verdict on a run.
type Report struct {
	Inputs          int
	Outputs         int // output records read back
	DLQ             int // dead-letter records read back
	Duplicates      int // outputs beyond the first per input
	Lost            int // inputs with neither output nor dead-letter record
	OrderViolations int // outputs that came before an earlier input of their session
	Malformed       int // records whose value holds no payload
}

// ExactlyOnce reports whether the run is correct.
func (r Report) ExactlyOnce() bool {
	return r.Duplicates == 0 && r.Lost == 0 && r.OrderViolations == 0 && r.Malformed == 0
}

func (r Report) String() string {
	return fmt.Sprintf("inputs=%d outputs=%d dlq=%d duplicates=%d lost=%d order_violations=%d malformed=%d",
		r.Inputs, r.Outputs, r.DLQ, r.Duplicates, r.Lost, r.OrderViolations, r.Malformed)
}

// Checker accumulates observations. Outputs of one session must be passed
// in the order their output partition holds them.
type Checker struct {
	r       Report
	seen    []uint8 // per input ID: 1 output, 2 dead-lettered
	lastSeq map[string]uint64

	firstDup int64 // the input whose second copy came first; -1: none
	dupAt    Copy  // where that second copy was read
	// firstOrder is the first output read before an earlier input of its
	// session (-1: none), orderAt where it was read.
	firstOrder int64
	orderAt    Copy
	watch      int64 // the input whose copies are kept (Watch); -1: none
	copies     []Copy
}

// NewChecker expects inputs with IDs 0..inputs-1.
func NewChecker(inputs int) *Checker {
	return &Checker{r: Report{Inputs: inputs}, seen: make([]uint8, inputs), lastSeq: make(map[string]uint64), firstDup: -1, firstOrder: -1, watch: -1}
}

// Watch keeps where every copy of input id is read (Observed.Where), for
// Copies. A failed run's second read-back watches its first duplicate.
func (c *Checker) Watch(id uint64) { c.watch = int64(id) }

// Copies returns where the watched input's copies were read, in the order
// they were passed.
func (c *Checker) Copies() []Copy { return c.copies }

// FirstDuplicate returns the input whose second copy was passed first.
func (c *Checker) FirstDuplicate() (uint64, bool) { return uint64(c.firstDup), c.firstDup >= 0 }

// FirstLost returns the lowest input ID never passed.
func (c *Checker) FirstLost() (uint64, bool) {
	for id, s := range c.seen {
		if s == 0 {
			return uint64(id), true
		}
	}
	return 0, false
}

// Output records one committed output.
func (c *Checker) Output(o Observed) {
	c.r.Outputs++
	c.keep(o)
	if !c.mark(o, 1) {
		return
	}
	last, ok := c.lastSeq[o.Session]
	if ok && o.Payload.Seq < last {
		c.r.OrderViolations++
		if c.firstOrder < 0 {
			c.firstOrder, c.orderAt = int64(o.Payload.ID), o.Where
		}
	}
	if !ok || o.Payload.Seq > last {
		c.lastSeq[o.Session] = o.Payload.Seq
	}
}

// DeadLetter records one committed dead-letter record. Dead-lettered
// records leave their session's order by design.
func (c *Checker) DeadLetter(o Observed) {
	c.r.DLQ++
	c.keep(o)
	c.mark(o, 2)
}

func (c *Checker) keep(o Observed) {
	if c.watch >= 0 && o.Payload.ID == uint64(c.watch) {
		c.copies = append(c.copies, o.Where)
	}
}

// Malformed records a value that holds no payload.
func (c *Checker) Malformed() { c.r.Malformed++ }

// mark notes o's input as delivered; it returns false for a duplicate.
func (c *Checker) mark(o Observed, how uint8) bool {
	id := o.Payload.ID
	if id >= uint64(len(c.seen)) {
		c.r.Malformed++
		return false
	}
	if c.seen[id] != 0 {
		c.r.Duplicates++
		if c.firstDup < 0 {
			c.firstDup, c.dupAt = int64(id), o.Where
		}
		return false
	}
	c.seen[id] = how
	return true
}

// Which names the records behind a failed verdict, not only their counts:
// the first duplicated input and where its second copy was read, the
// lowest lost input, and the first output read before an earlier input of
// its session. dups and order say whether duplicates and order are judged
// (a run whose duplicate inputs must each be output once, an unordered
// one). "" when there is none to name.
func (c *Checker) Which(dups, order bool) string {
	at := func(w Copy) string {
		if w.Topic == "" {
			return ""
		}
		return " at " + w.String()
	}
	var parts []string
	if dups && c.firstDup >= 0 {
		parts = append(parts, fmt.Sprintf("first duplicate: input %d, again%s", c.firstDup, at(c.dupAt)))
	}
	if id, ok := c.FirstLost(); ok {
		parts = append(parts, fmt.Sprintf("first lost: input %d", id))
	}
	if order && c.firstOrder >= 0 {
		parts = append(parts, fmt.Sprintf("first out of order: input %d%s", c.firstOrder, at(c.orderAt)))
	}
	return strings.Join(parts, "; ")
}

// Report returns the verdict; inputs never seen count as lost.
func (c *Checker) Report() Report {
	r := c.r
	for _, s := range c.seen {
		if s == 0 {
			r.Lost++
		}
	}
	return r
}
