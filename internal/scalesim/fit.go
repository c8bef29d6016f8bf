package scalesim

import "math"

// Exponent fits y = c·x^k by least squares on log y against log x and
// returns k: 0 is flat, 1 linear. It is NaN with fewer than two points or
// any value not above 0 (a log-log fit cannot take them).
func Exponent(x, y []float64) float64 {
	if len(x) != len(y) || len(x) < 2 {
		return math.NaN()
	}
	var sx, sy, sxx, sxy float64
	for i := range x {
		if x[i] <= 0 || y[i] <= 0 {
			return math.NaN()
		}
		lx, ly := math.Log(x[i]), math.Log(y[i])
		sx, sy, sxx, sxy = sx+lx, sy+ly, sxx+lx*lx, sxy+lx*ly
	}
	n := float64(len(x))
	d := n*sxx - sx*sx
	if d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}
