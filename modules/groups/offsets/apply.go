package offsets

import (
	"errors"
	"fmt"
)

// applyOpts select ApplyBatch, Reapply, ApplyMarker and SetTxnReplayStart.
type applyOpts struct {
	skipApplied bool  // skip records at or below the applied offset
	through     int64 // move the applied offset at least to this (0: the last record)
	setTxn      bool  // write txnStart
	txnStart    int64 // < 0: delete
}

// last is the offset the applied offset moves to (when higher) after recs.
func (o applyOpts) last(recs []Record) int64 {
	last := o.through
	if len(recs) > 0 {
		last = max(last, recs[len(recs)-1].Offset)
	}
	return last
}

// applyOp is one decoded record of an apply, the same for Store and Memory.
type applyOp struct {
	key    Key       // for a skipped record only key.Version is set
	skip   bool      // unread key version: only the applied offset moves
	delete bool      // a tombstone
	c      Committed // an offset commit's value
	value  []byte    // a group metadata or group record value (decodable; the record's bytes, not copied)
}

// decodeApply decodes every record of an apply to partition before anything
// changes, so a bad record fails the whole batch: offsets must ascend, keys of
// versions this package cannot read are skipped, and values must decode (group
// record values with their type's decoder, though only their bytes are kept).
func decodeApply(partition int32, recs []Record) ([]applyOp, error) {
	ops := make([]applyOp, len(recs))
	for i, r := range recs {
		if i > 0 && r.Offset <= recs[i-1].Offset {
			return nil, fmt.Errorf("apply %d@%d: offsets not ascending", partition, r.Offset)
		}
		k, err := DecodeKey(r.Key)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedVersion) {
				return nil, fmt.Errorf("apply %d@%d: %w", partition, r.Offset, err)
			}
			ops[i] = applyOp{key: Key{Version: k.Version}, skip: true}
			continue
		}
		ops[i].key = k
		switch {
		case r.Value == nil:
			ops[i].delete = true
		case k.IsOffset():
			if ops[i].c, err = DecodeOffsetValue(r.Value); err != nil {
				return nil, fmt.Errorf("apply %d@%d: %w", partition, r.Offset, err)
			}
		case k.IsGroupRecord():
			if err := checkGroupRecordValue(k.Version, r.Value); err != nil {
				return nil, fmt.Errorf("apply %d@%d: %w", partition, r.Offset, err)
			}
			ops[i].value = r.Value
		default: // GroupKeyV2, the only other version DecodeKey returns
			if _, err := DecodeGroupMetadataValue(r.Value); err != nil {
				return nil, fmt.Errorf("apply %d@%d: %w", partition, r.Offset, err)
			}
			ops[i].value = r.Value
		}
	}
	return ops, nil
}
