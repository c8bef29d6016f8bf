//go:build race

package main

// raceEnabled builds test subprocesses with the race detector when the
// tests themselves run with it.
const raceEnabled = true
