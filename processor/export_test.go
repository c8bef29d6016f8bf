package processor

import "time"

// SetLagRefreshInterval sets how often the lag gauge's end offsets are
// listed, and returns a func that restores the previous interval. Call it
// before Run and restore after Run returns.
func SetLagRefreshInterval(d time.Duration) (restore func()) {
	old := lagRefreshInterval
	lagRefreshInterval = d
	return func() { lagRefreshInterval = old }
}
