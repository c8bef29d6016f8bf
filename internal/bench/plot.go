package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot geometry: three panels side by side.
const (
	plotWidth  = 45 * vg.Centimeter
	plotHeight = 12 * vg.Centimeter
	// timelinePoints bounds a throughput curve's points: a minutes-long
	// run's 100ms buckets are merged, so that the curve stays readable.
	timelinePoints = 100
	// minBucketsPerPoint: a point is at least 300ms, three default
	// commit intervals. Outputs become visible at commits, and in 100ms
	// points a commit landing on either side of a bucket's edge reads as
	// a stop followed by double speed.
	minBucketsPerPoint = 3
	// percentileSteps is the points per decade of 1/(1-p).
	percentileSteps = 20
)

// percentileTicks label the latency panel's x axis, 1/(1-p) on a log
// scale, with the percentiles HdrHistogram's plots show.
var percentileTicks = []struct {
	x     float64
	label string
}{
	{1, "0%"}, {2, "50%"}, {10, "90%"}, {100, "99%"}, {1e3, "99.9%"},
	{1e4, "99.99%"}, {1e5, "99.999%"}, {1e6, "99.9999%"},
}

// plotSeries is one mode of one phase: its runs' latency histograms
// merged (every record of every run, the best estimate of the
// distribution) and the timeline of its median run (runs differ in length
// and in where their commits fall, so their timelines do not average).
type plotSeries struct {
	label  string
	hist   *hdrhistogram.Histogram
	median *Result
}

// WritePlot draws each mode's latency percentile curve and its throughput
// over its run, side by side in one SVG: x is 1/(1-p) on a log scale, as
// HdrHistogram's plots have it; with several runs of a mode, the latency
// curve is of their merged histograms and the throughput curve of its
// median run (the lower middle one for an even count).
func WritePlot(w io.Writer, rs []Result) error {
	c := vgsvg.New(plotWidth, plotHeight)
	if err := drawPlots(c, rs); err != nil {
		return err
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("bench: writing the SVG: %w", err)
	}
	return nil
}

// drawPlots draws the two panels on c, of any vg backend.
func drawPlots(c vg.CanvasSizer, rs []Result) error {
	series := plotSeriesOf(rs)
	lat, err := latencyPlot(series)
	if err != nil {
		return err
	}
	thr, err := throughputPlot(series)
	if err != nil {
		return err
	}
	over, err := latencyOverRunPlot(series)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Centimeter, PadTop: vg.Millimeter * 5, PadBottom: vg.Millimeter * 5,
		PadLeft: vg.Millimeter * 5, PadRight: vg.Millimeter * 5}
	canvases := plot.Align([][]*plot.Plot{{lat, thr, over}}, tiles, dc)
	lat.Draw(canvases[0][0])
	thr.Draw(canvases[0][1])
	over.Draw(canvases[0][2])
	return nil
}

// plotSeriesOf groups results by phase and mode, in order of first run,
// as Summarize does. Labels are the mode, prefixed with the phase when
// there are several.
func plotSeriesOf(rs []Result) []plotSeries {
	var phases []string
	for _, r := range rs {
		if !slices.Contains(phases, r.Scenario) {
			phases = append(phases, r.Scenario)
		}
	}
	var out []plotSeries
	for _, s := range Summarize(rs) {
		var runs []*Result
		for i := range rs {
			if rs[i].Scenario == s.Scenario && rs[i].Mode == s.Mode {
				runs = append(runs, &rs[i])
			}
		}
		ps := plotSeries{label: string(s.Mode), hist: newHistogram()}
		if len(phases) > 1 {
			ps.label = s.Scenario + " " + ps.label
		}
		for _, r := range runs {
			if r.hist != nil {
				ps.hist.Merge(r.hist) // same range: nothing dropped
			}
		}
		slices.SortStableFunc(runs, func(a, b *Result) int {
			switch {
			case a.Throughput < b.Throughput:
				return -1
			case a.Throughput > b.Throughput:
				return 1
			}
			return 0
		})
		ps.median = runs[(len(runs)-1)/2]
		out = append(out, ps)
	}
	return out
}

func latencyPlot(series []plotSeries) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "latency by percentile (all runs merged)"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency ms"
	p.X.Scale = plot.LogScale{}
	p.Legend.Top, p.Legend.Left = true, true
	xmax, ymax := 10.0, 0.0 // a log axis needs a range even with nothing to draw
	for i, s := range series {
		n := s.hist.TotalCount()
		if n == 0 {
			continue // every input dead-lettered, or the run failed early
		}
		pts := percentileCurve(s.hist)
		xmax = math.Max(xmax, pts[len(pts)-1].X)
		ymax = math.Max(ymax, pts[len(pts)-1].Y)
		if err := addLine(p, i, s.label, pts, plotter.NoStep); err != nil {
			return nil, err
		}
	}
	var ticks plot.ConstantTicks
	for _, t := range percentileTicks {
		if t.x <= xmax {
			ticks = append(ticks, plot.Tick{Value: t.x, Label: t.label})
		}
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = 1, xmax
	p.Y.Min, p.Y.Max = 0, legendRoom(ymax, len(series))
	p.Add(plotter.NewGrid())
	return p, nil
}

// percentileCurve samples h at percentileSteps points per decade of
// 1/(1-p), from p = 0 up to 1/(1-p) = its count (beyond it, percentiles
// of a sample say nothing more) or 10^6.
func percentileCurve(h *hdrhistogram.Histogram) plotter.XYs {
	xmax := math.Min(float64(h.TotalCount()), 1e6)
	decades := math.Log10(math.Max(xmax, 1))
	steps := max(1, int(math.Ceil(decades*percentileSteps)))
	pts := make(plotter.XYs, 0, steps+1)
	for k := 0; k <= steps; k++ {
		x := math.Pow(10, decades*float64(k)/float64(steps))
		q := 100 * (1 - 1/x)
		// Below one record's share hdrhistogram answers 0, not the
		// minimum: no latency is below the minimum.
		v := max(h.ValueAtQuantile(q), h.Min())
		pts = append(pts, plotter.XY{X: x, Y: float64(v) / 1000})
	}
	return pts
}

func throughputPlot(series []plotSeries) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "seconds since the run's start"
	p.Y.Label.Text = "inputs accounted for per second"
	p.Legend.Top = true
	k := pointBuckets(series)
	p.Title.Text = fmt.Sprintf("throughput over the run (median run, per %v)", time.Duration(k)*timelineStep)
	ymax := 0.0
	for i, s := range series {
		if s.median.timeline == nil {
			continue
		}
		starts, rates := s.median.timeline.rates(k)
		if len(starts) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, len(starts)+1)
		for j := range starts {
			pts = append(pts, plotter.XY{X: starts[j], Y: rates[j]})
			ymax = math.Max(ymax, rates[j])
		}
		// The last step runs to the last input accounted for.
		pts = append(pts, plotter.XY{X: s.median.timeline.end.Seconds(), Y: rates[len(rates)-1]})
		if err := addLine(p, i, s.label, pts, plotter.PostStep); err != nil {
			return nil, err
		}
	}
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, legendRoom(ymax, len(series))
	p.Add(plotter.NewGrid())
	return p, nil
}

// pointBuckets is the timeline buckets per point of the over-the-run
// panels: one width for every curve, so that they compare, enough to keep
// the longest run under timelinePoints.
func pointBuckets(series []plotSeries) int {
	longest := 0
	for _, s := range series {
		if s.median.timeline != nil {
			longest = max(longest, len(s.median.timeline.counts))
		}
	}
	return max(minBucketsPerPoint, (longest+timelinePoints-1)/timelinePoints)
}

// latencyOverRunPlot draws each mode's median latency over its median
// run: with transactions pipelined, outputs of the next transaction
// become visible one commit round trip after the last ones, and the
// median stays near that round trip.
func latencyOverRunPlot(series []plotSeries) (*plot.Plot, error) {
	p := plot.New()
	k := pointBuckets(series)
	p.Title.Text = fmt.Sprintf("median latency over the run (median run, per %v)", time.Duration(k)*timelineStep)
	p.X.Label.Text = "seconds since the run's start"
	p.Y.Label.Text = "p50 latency ms"
	p.Legend.Top = true
	ymax := 0.0
	for i, s := range series {
		if s.median.timeline == nil {
			continue
		}
		starts, p50 := s.median.timeline.medians(k)
		if len(starts) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(starts))
		for j := range starts {
			pts[j] = plotter.XY{X: starts[j], Y: p50[j]}
			ymax = math.Max(ymax, p50[j])
		}
		if err := addLine(p, i, s.label, pts, plotter.PostStep); err != nil {
			return nil, err
		}
	}
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, legendRoom(ymax, len(series))
	p.Add(plotter.NewGrid())
	return p, nil
}

// legendRoom is the top of a y axis whose data reach ymax: above them,
// room for the legend's n entries at the top of the panel, so that it
// hides no curve.
func legendRoom(ymax float64, n int) float64 {
	if ymax <= 0 {
		return 1
	}
	return ymax * (1.05 + 0.07*float64(n))
}

// addLine adds series i, coloured and dashed by its index in both panels
// alike, with a legend entry.
func addLine(p *plot.Plot, i int, label string, pts plotter.XYs, step plotter.StepKind) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("plotting %s: %w", label, err)
	}
	l.StepStyle = step
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i)
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}
