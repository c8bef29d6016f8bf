// Package dedupe is a durable, Pebble-backed store of event IDs with a
// retention window, for making event handlers idempotent. It needs no Kafka.
//
//	s, err := dedupe.Open(dir, &dedupe.Options{Sync: true})
//	first, err := s.Claim(eventID)          // atomic check-and-mark
//	ran, err := s.Once(ctx, eventID, effect) // mark only after effect succeeds
//
// # Retention
//
// A mark is reported by Seen for at least Options.TTL and at most
// TTL+Options.BucketWidth after it was made (re-marking extends it). IDs
// inside the window are never forgotten; older ones may be.
//
// # Layout and expiry
//
// A mark is recorded under two kinds of keys: an index key
// "i" | len(id) | id | ^bucket per ID, and an expiry-log entry
// "x" | bucket | seq per write batch whose value lists the batch's IDs.
// A custom pebble Split makes the ID the bloom-filter prefix of index keys,
// so a pebble lookup is a single bloom-filtered SeekPrefixGE that lands on
// the newest bucket of the ID; the bucket is compared with the window, so an
// expired but not yet deleted mark already reads as unseen.
//
// # Write path and lookups
//
// Random index keys are what a write costs: inserting each into pebble's
// memtable skiplist is a cache-missing search. So a write (Mark, Claim,
// ClaimBatch, ApplyMarks) commits only its expiry-log entry, durable per
// Options.Sync, and stages its IDs in memory; an indexing round later writes
// the index keys of a whole generation of staged marks (about 128K IDs) as
// one sorted batch, which pebble commits as a flushable batch without
// skiplist inserts. The round also records the last log sequence number it
// covers, and Open indexes the log entries after it, so a crash loses no
// mark the log kept. Forget and Close run a round first. Staged marks take
// at most about 20 MiB (for 16-byte IDs): writers wait while a round is
// behind by two generations.
//
// A lookup asks, in order: an in-memory blocked bloom filter of the marks
// in the window (one per eighth of the window, built from the expiry log in
// the background after Open), which rules out almost every new ID without
// reading pebble; the staged marks; and pebble. The filter takes 2 to 4
// bytes per ID in the window, and at least 256 KiB per epoch in use;
// Options.DisableFilter turns it off.
//
// Expiry runs in the background when a write notices that a bucket boundary
// has passed (so an injected fake clock drives it deterministically), or on
// ExpireNow. It reads the expiry log of the expired buckets only, which is
// ordered by bucket and so one contiguous range, issues a blind point delete
// for each index key named there, and drops the log range with one
// DeleteRange, and the filters of wholly expired epochs. A newer mark of the
// same ID has a different index key and is untouched, so expiry needs no
// read-modify-write and takes no lock that lookups or claims wait on.
// Indexing rounds skip staged marks below the expiry floor.
//
// The alternative, bucket-major keys bucket | id with one point lookup per
// live bucket, makes expiry a pure DeleteRange but costs TTL/BucketWidth+1
// lookups per Seen (169 with hourly buckets over 7 days). This design pays
// one extra key per mark and one point delete per expired mark instead, and
// keeps every lookup at one seek regardless of bucket width.
//
// # Durability and corruption
//
// With Options.Sync every write fsyncs the pebble WAL before returning, so a
// returned Mark, Claim or Once survives a crash; without it the latest
// milliseconds of marks may be lost. A store is created with a synced
// format marker. Opening a directory that holds pebble files but no marker,
// a MANIFEST or sstable that is missing, or a marker of an unknown version
// fails (ErrCorrupt, ErrIncompatible): a dedupe store that silently came back
// empty would re-run every side effect. Damage inside an sstable is found
// by checksums when it is read and reported as ErrCorrupt by that call.
//
// # Once and the remaining window
//
// Once(ctx, id, fn) runs fn only if id is unmarked and marks id only after
// fn returned nil. Marking after the effect is deliberate: tools that mark
// first and then act lose the effect when the process dies in between, and
// tools that keep recent IDs in memory (say, for a minute) forget them on
// restart or after the minute.
//
// One window remains. If fn succeeds and the process crashes before the mark
// is durable (before Mark's fsync with Options.Sync, or before the WAL is
// flushed without it), the retry runs fn again. Once therefore gives
// at-least-once external effects: exactly once in the normal case, and
// possibly twice around a crash. To close the window, pass the event ID to
// the external system as an idempotency key (for example an HTTP
// Idempotency-Key header), so the receiver drops the repeat; see the
// example. Concurrent Once calls for one ID are serialised within a process;
// across processes, use the idempotency key as well.
//
// # Integration
//
// ApplyMarks(ids, at) writes marks made elsewhere, at their own time, in one
// batch. Marks are idempotent and commutative (an ID is seen while any of
// its marks is inside the window), so a stream processor can check Seen,
// stage the IDs it handled, apply them after its transaction commits, and
// mirror them (ID, mark time) to a compacted changelog from which they can be
// replayed in any order. Apply writes a Batch of marks, each at its own
// time, together with metadata values (Meta reads them back) in one atomic
// write: the processor (processor.WithDedupe) keeps each partition's
// changelog checkpoint that way, so marks and checkpoint never disagree.
// Options.SyncOnce fsyncs Once's marks while bulk writes, which such a
// caller can replay, stay unsynced.
package dedupe
