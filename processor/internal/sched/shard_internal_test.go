package sched

import (
	"fmt"
	"testing"
)

// TestShardSpread: session keys that differ only in their last bytes, as
// most do, spread over every shard. Each shard has its lock, which the
// dispatcher and the workers take for every unit; with FNV-1a's top bits
// alone, 1,000 keys "session-0000" to "session-0999" fell on 10 of 64
// shards, up to 100 on one.
func TestShardSpread(t *testing.T) {
	const shards, keys = 64, 1000
	var per [shards]int
	for i := range keys {
		per[shardOf(hashKey(fmt.Appendf(nil, "session-%04d", i)), shards)]++
	}
	for s, n := range per {
		if n == 0 || n > 2*keys/shards {
			t.Fatalf("shard %d holds %d of %d keys (mean %d): %v", s, n, keys, keys/shards, per)
		}
	}
}
