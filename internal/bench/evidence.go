package bench

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/onceflow/onceflow/internal/verify"
)

// Evidence is what a failed run leaves to be diagnosed: a FAIL whose
// topics were deleted at the end says nothing of whether the processor
// committed twice or the read-back counted twice (issue 42). So a failed
// run's topics and groups are kept whatever -keep says, its workers' logs
// stay on disk, the output is read back a second time with a fresh client,
// and the first duplicated input is traced to its copies and the
// transactions that wrote them.
type Evidence struct {
	// Prefix starts the name of every topic and group the invocation
	// made, kept on the brokers (an embedded cluster's end with the
	// process).
	Prefix string `json:"prefix"`
	Kept   bool   `json:"topics_kept"`
	// WorkerLogs is the directory of the run's worker logs, one file per
	// instance ID (subprocess and JVM modes).
	WorkerLogs string `json:"worker_logs,omitempty"`
	// SecondRead is the verdict of the second read-back, ReadsAgree
	// whether it equals the first; SecondReadErr why it could not be made.
	SecondRead    string `json:"second_read,omitempty"`
	ReadsAgree    bool   `json:"reads_agree"`
	SecondReadErr string `json:"second_read_error,omitempty"`
	// FirstDuplicate is the input whose second copy was read first,
	// with every copy of it the second read found.
	FirstDuplicate *DuplicateEvidence `json:"first_duplicate,omitempty"`
	// FirstLost is the lowest input ID with neither output nor dead
	// letter.
	FirstLost *uint64 `json:"first_lost,omitempty"`
}

// DuplicateEvidence is one duplicated input and where its copies are.
type DuplicateEvidence struct {
	Input  uint64         `json:"input"`
	Copies []CopyEvidence `json:"copies"`
}

// CopyEvidence is one copy, with the transactional ID of the producer
// that wrote it when the brokers still list it.
type CopyEvidence struct {
	verify.Copy
	TransactionalID string `json:"transactional_id,omitempty"`
}

func (c CopyEvidence) String() string {
	if c.TransactionalID == "" {
		return c.Copy.String()
	}
	return fmt.Sprintf("%s, transactional ID %s", c.Copy.String(), c.TransactionalID)
}

// gatherEvidence keeps a failed run's topics and logs, reads its output a
// second time and traces the first duplicate (first is the first read's
// checker).
func (t *trial) gatherEvidence(ctx context.Context, first *verify.Checker) *Evidence {
	env := t.r.Env
	env.keepForEvidence()
	ev := &Evidence{Prefix: env.prefix, Kept: !env.Fake, WorkerLogs: t.logDir}
	if lost, ok := first.FirstLost(); ok {
		ev.FirstLost = &lost
	}
	dup, hasDup := first.FirstDuplicate()
	watch := int64(-1)
	if hasDup {
		watch = int64(dup)
	}
	second, _, err := verifyOutput(ctx, t.r.Log, env.Brokers, env.opts, t.job.Output, t.job.DLQ, t.res.Messages, watch)
	if err != nil {
		ev.SecondReadErr = err.Error()
		return ev
	}
	rep := second.Report()
	ev.SecondRead, ev.ReadsAgree = rep.String(), rep == first.Report()
	if hasDup {
		ev.FirstDuplicate = &DuplicateEvidence{Input: dup}
		for _, c := range second.Copies() {
			ev.FirstDuplicate.Copies = append(ev.FirstDuplicate.Copies, CopyEvidence{Copy: c})
		}
		t.nameProducers(ctx, ev.FirstDuplicate.Copies)
	}
	return ev
}

// nameProducers fills in the transactional IDs of the copies' producers,
// as far as the transaction coordinators still list them.
func (t *trial) nameProducers(ctx context.Context, copies []CopyEvidence) {
	var ids []int64
	for _, c := range copies {
		ids = append(ids, c.ProducerID)
	}
	listed, err := t.r.Env.adm.ListTransactions(ctx, ids, nil)
	if err != nil && len(listed) == 0 {
		t.r.Log.Warn("evidence: listing the transactions of the duplicate's producers", "err", err)
		return
	}
	byID := make(map[int64]string, len(listed))
	for _, l := range listed {
		byID[l.ProducerID] = l.TxnID
	}
	for i := range copies {
		copies[i].TransactionalID = byID[copies[i].ProducerID]
	}
}

// writeEvidence prints a failed run's evidence, a line a fact.
func writeEvidence(w io.Writer, who string, ev *Evidence) {
	if ev.Kept {
		fmt.Fprintf(w, "%s: evidence: topics and groups kept on the brokers, prefix %s\n", who, ev.Prefix)
	} else {
		fmt.Fprintf(w, "%s: evidence: topics of prefix %s were on the embedded cluster, gone with this process\n", who, ev.Prefix)
	}
	if ev.WorkerLogs != "" {
		fmt.Fprintf(w, "%s: evidence: worker logs in %s\n", who, ev.WorkerLogs)
	}
	switch {
	case ev.SecondReadErr != "":
		fmt.Fprintf(w, "%s: evidence: the second read-back failed: %s\n", who, ev.SecondReadErr)
	case ev.ReadsAgree:
		fmt.Fprintf(w, "%s: evidence: a second read-back with a fresh client agrees: %s\n", who, ev.SecondRead)
	default:
		fmt.Fprintf(w, "%s: evidence: a second read-back with a fresh client DISAGREES: %s\n", who, ev.SecondRead)
	}
	if d := ev.FirstDuplicate; d != nil {
		copies := make([]string, len(d.Copies))
		for i, c := range d.Copies {
			copies[i] = c.String()
		}
		fmt.Fprintf(w, "%s: evidence: first duplicated input %d, copies at %s\n", who, d.Input, strings.Join(copies, "; "))
	}
	if ev.FirstLost != nil {
		fmt.Fprintf(w, "%s: evidence: first lost input %d\n", who, *ev.FirstLost)
	}
}
