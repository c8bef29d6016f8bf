package processor

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
)

// dedupeTarget is one input partition's marks in the shared store, and
// its changelog target.
//
// Keys: processed marks are 'p' | ns | epoch | event ID, effect marks
// 'e' | ns | uvarint(len(name)) | name | event ID, with ns the input topic
// (length-prefixed) and partition. The partition's checkpoint, a metadata
// value, holds the changelog topic ID and offset and the epoch. A restore
// that must rebuild (no valid checkpoint) cannot delete the old marks one
// by one, so it bumps the epoch instead: older marks become invisible and
// expire with time. Effect marks have no epoch: they are local and survive
// a rebuild.
type dedupeTarget struct {
	store     *dedupe.Store
	topic     string
	partition int32
	maxID     int // the longest event ID accepted
	// epoch and markPre (the prefix of markKey) are written by the
	// restore (Checkpoint, Reset) and read by the loop only after the
	// restore has reported back.
	epoch   uint32
	markPre []byte
}

func newDedupeTarget(s *dedupe.Store, topic string, partition int32, maxID int) *dedupeTarget {
	t := &dedupeTarget{store: s, topic: topic, partition: partition, maxID: maxID}
	t.setEpoch(0)
	return t
}

func (t *dedupeTarget) setEpoch(e uint32) {
	t.epoch = e
	t.markPre = binary.BigEndian.AppendUint32(t.ns('p'), e)
}

func (t *dedupeTarget) ns(tag byte) []byte {
	k := append(make([]byte, 0, 64), tag)
	k = binary.AppendUvarint(k, uint64(len(t.topic)))
	k = append(k, t.topic...)
	return binary.BigEndian.AppendUint32(k, uint32(t.partition))
}

func (t *dedupeTarget) markKey(id []byte) []byte {
	return append(t.markPre[:len(t.markPre):len(t.markPre)], id...)
}

func (t *dedupeTarget) effectKey(name string, id []byte) []byte {
	k := binary.AppendUvarint(t.ns('e'), uint64(len(name)))
	return append(append(k, name...), id...)
}

func (t *dedupeTarget) cpKey() []byte { return t.ns('c') }

// encodeCheckpoint: topic ID (16 bytes), next offset (8), epoch (4),
// whether the offset is valid (1).
func encodeCheckpoint(topicID [16]byte, next int64, epoch uint32, ok bool) []byte {
	v := binary.BigEndian.AppendUint64(topicID[:], uint64(next))
	v = binary.BigEndian.AppendUint32(v, epoch)
	if ok {
		return append(v, 1)
	}
	return append(v, 0)
}

func (t *dedupeTarget) Checkpoint() ([16]byte, int64, bool, error) {
	var id [16]byte
	v, ok, err := t.store.Meta(t.cpKey())
	if err != nil || !ok {
		return id, 0, false, err
	}
	if len(v) != 29 {
		return id, 0, false, fmt.Errorf("processor: dedupe checkpoint of %s/%d has %d bytes", t.topic, t.partition, len(v))
	}
	copy(id[:], v)
	t.setEpoch(binary.BigEndian.Uint32(v[24:]))
	return id, int64(binary.BigEndian.Uint64(v[16:])), v[28] == 1, nil
}

func (t *dedupeTarget) Reset() error {
	t.setEpoch(t.epoch + 1)
	var b dedupe.Batch
	b.SetMeta(t.cpKey(), encodeCheckpoint([16]byte{}, 0, t.epoch, false))
	return t.store.Apply(&b)
}

// Apply replays changelog marks at their own times; records that are not
// marks (tombstones, foreign writes) are skipped.
func (t *dedupeTarget) Apply(recs []*kgo.Record, topicID [16]byte, next int64) error {
	var b dedupe.Batch
	for _, r := range recs {
		if len(r.Value) != 8 || len(r.Key) == 0 || len(r.Key) > t.maxID {
			continue
		}
		b.Mark(t.markKey(r.Key), time.Unix(0, int64(binary.BigEndian.Uint64(r.Value))))
	}
	b.SetMeta(t.cpKey(), encodeCheckpoint(topicID, next, t.epoch, true))
	return t.store.Apply(&b)
}
