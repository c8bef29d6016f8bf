package scalesim

import (
	"context"
	"flag"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	sweep  = flag.String("scalesim.sweep", "", "run the sweep: partitions×instances pairs, e.g. 100x10,1000x10,10000x10,100x100,1000x100,10000x100")
	prof   = flag.String("scalesim.idleprofile", "", "write the last sweep point's idle heap profile to this file")
	within = flag.Duration("scalesim.within", 15*time.Minute, "bound on each wait of a sweep point")
	v39    = flag.Bool("scalesim.v39", true, "sweep on kfake pinned to Kafka 3.9 (AddPartitionsToTxn and AddOffsetsToTxn sent); false: Kafka 4's transaction.version 2")
)

func TestExponent(t *testing.T) {
	x := []float64{100, 1000, 10000}
	for _, k := range []float64{0, 0.5, 1, 2} {
		y := []float64{3 * math.Pow(100, k), 3 * math.Pow(1000, k), 3 * math.Pow(10000, k)}
		if got := Exponent(x, y); math.Abs(got-k) > 1e-9 {
			t.Errorf("exponent of x^%v: %v", k, got)
		}
	}
	if got := Exponent(x, []float64{1, 0, 2}); !math.IsNaN(got) {
		t.Errorf("a zero: %v, want NaN", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{Partitions: 0, Instances: 1}, {Partitions: 10, Instances: 0}, {Partitions: 10, Instances: 11}} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestCommitsGrowWithTouchedNotAssigned pins that a commit costs what it
// touched: with input to 10 of 1,000 assigned partitions, no offset
// commit, AddPartitionsToTxn or Produce names more than those 10, and a
// commit's requests and bytes are those of 10 partitions out of 100
// assigned, within timing's slack (how records fall into commits).
func TestCommitsGrowWithTouchedNotAssigned(t *testing.T) {
	run := func(partitions int32) Result {
		res, err := Run(context.Background(), Config{Partitions: partitions, Instances: 4, Touched: 10, PreKIP890: true, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	small, big := run(100), run(1000)
	for _, k := range []kmsg.Key{kmsg.TxnOffsetCommit, kmsg.AddPartitionsToTxn, kmsg.Produce} {
		if n := big.Touched.Counts.ByKey[int16(k)].MaxNamed; n > 10 {
			t.Errorf("%s named %d partitions in one request; 10 were touched, 1,000 assigned", kmsg.NameForKey(int16(k)), n)
		}
	}
	cost := func(r Result) (reqs, bytes float64) {
		for _, k := range Keys {
			q, w, rd, _ := r.Touched.PerCommit(k)
			reqs, bytes = reqs+q, bytes+w+rd
		}
		return reqs, bytes
	}
	sq, sb := cost(small)
	bq, bb := cost(big)
	t.Logf("per commit, 10 partitions touched: %d assigned %.1f requests %.0f bytes; %d assigned %.1f requests %.0f bytes",
		small.Config.Partitions, sq, sb, big.Config.Partitions, bq, bb)
	// Ten times the assigned partitions: a commit that named them all
	// would cost several times more; the same touched ones, about the same.
	if bq > 2*sq || bb > 2*sb {
		t.Errorf("per commit with 10× the partitions assigned and the same 10 touched: %.1f requests %.0f bytes against %.1f and %.0f", bq, bb, sq, sb)
	}
}

// TestSweep is the scale sweep behind -scalesim.sweep (docs/benchmarks.md,
// "Scale by simulation (kfake)").
func TestSweep(t *testing.T) {
	if *sweep == "" {
		t.Skip("the sweep runs with -scalesim.sweep")
	}
	if *prof != "" {
		runtime.MemProfileRate = 4096 // fine enough to see a partition's few KiB
	}
	var results []Result
	pairs := strings.Split(*sweep, ",")
	for n, pair := range pairs {
		ps, is, ok := strings.Cut(pair, "x")
		p, err1 := strconv.Atoi(ps)
		i, err2 := strconv.Atoi(is)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("-scalesim.sweep: %q is not partitions x instances", pair)
		}
		cfg := Config{Partitions: int32(p), Instances: i, Busy: 2, PreKIP890: *v39, IdleFor: 11 * time.Second, Within: *within, Logf: t.Logf}
		if *prof != "" && n == len(pairs)-1 {
			f, err := os.Create(*prof)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg.IdleProfile = f
		}
		start := time.Now()
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%d × %d: %v", p, i, err)
		}
		t.Logf("%d × %d done in %v", p, i, time.Since(start).Round(time.Second))
		results = append(results, res)
	}
	t.Log("\n" + Markdown(results))
}
