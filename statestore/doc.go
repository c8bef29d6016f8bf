// Package statestore keeps session state for onceflow jobs in Pebble,
// namespaced per input partition and kept exactly as consistent as the
// job's outputs.
//
// The processor buffers a transaction's writes, produces them to a
// compacted changelog topic (one partition per input partition) inside the
// same Kafka transaction as the outputs and offsets, and only after the
// transaction commits applies them here in one batch together with a
// checkpoint: the changelog offset they reach. The local store is therefore
// never ahead of Kafka. It may be behind (a crash between the commit and
// the batch, or writes made by another instance while the partition was
// elsewhere); on assignment the processor replays the changelog from the
// checkpoint to its committed end, or from the start when the checkpoint is
// missing or belongs to another incarnation of the topic.
//
// Unlike Kafka Streams under exactly-once, a crash does not wipe the local
// store: it holds only committed data, so restore replays just the tail.
//
// # Using it
//
// Most users only configure it: processor.WithStateStore(dir, &Options{…})
// gives handlers the state, which they reach through
// processor.StateFrom(ctx) (see package processor for the read-your-writes
// rules). Open a processor's directory yourself only while no processor
// has it open, to inspect it. A loop of one's own on package txn can keep
// a Store the same way the processor does: a Batch per committed
// transaction, with its writes (Write) and the changelog position they
// reach (Checkpoint), which says where to resume the changelog after a
// restart; see the Example. Keys are namespaced per Partition, so one
// Store holds every partition.
package statestore
