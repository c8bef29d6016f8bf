package statestore_test

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/onceflow/onceflow/statestore"
)

// A store kept by a loop of one's own (on package txn, say), the way the
// processor keeps its: each committed transaction's writes are applied in
// one batch with the changelog offset they reach, so after a restart the
// store says where to resume replaying the changelog.
func Example() {
	store, err := statestore.Open("state", &statestore.Options{
		FS: vfs.NewMem(), // a real job passes a directory on disk
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	p := statestore.Partition{Topic: "bookings", Partition: 0}
	changelog := [16]byte{0x5e} // the changelog topic's ID (kadm's TopicDetail.ID)

	// Transaction 1 wrote changelog offsets 0 and 1.
	b := store.NewBatch()
	b.Write(p,
		statestore.Write{Key: []byte("trip-1/destination"), Value: []byte("London")},
		statestore.Write{Key: []byte("trip-2/destination"), Value: []byte("Rome")},
	)
	b.SetCheckpoint(p, statestore.Checkpoint{TopicID: changelog, Next: 2})
	if err := b.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	// Transaction 2, offsets 2 and 3.
	b = store.NewBatch()
	b.Write(p,
		statestore.Write{Key: []byte("trip-1/destination"), Value: []byte("Paris")},
		statestore.Write{Key: []byte("trip-2/destination"), Delete: true},
	)
	b.SetCheckpoint(p, statestore.Checkpoint{TopicID: changelog, Next: 4})
	if err := b.Commit(); err != nil {
		fmt.Println(err)
		return
	}

	v, ok, _ := store.Get(p, []byte("trip-1/destination"))
	fmt.Println(string(v), ok)
	_ = store.Scan(p, []byte("trip-"), func(key, value []byte) bool {
		fmt.Printf("%s = %s\n", key, value)
		return true
	})
	cp, ok, _ := store.Checkpoint(p)
	fmt.Println("resume the changelog at offset", cp.Next, ok, cp.TopicID == changelog)
	// Output:
	// Paris true
	// trip-1/destination = Paris
	// resume the changelog at offset 4 true true
}
