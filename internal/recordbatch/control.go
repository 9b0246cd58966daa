package recordbatch

import (
	"encoding/binary"
	"fmt"
)

// Transaction markers (control batches).
//
// A marker is a batch with the control and transactional attributes, the producer's id
// and epoch, base sequence -1, and exactly one record:
//
//	key   = version int16 (0), type int16 (0 ABORT, 1 COMMIT)
//	value = version int16 (0), coordinator_epoch int32
//
// It takes one offset, as Kafka's EndTransactionMarker does. Control types other than
// 0 and 1 exist (KRaft uses 2-6 in its own log); partitions only ever hold 0 and 1.

// Control record types.
const (
	ControlAbort  = 0
	ControlCommit = 1
)

// Marker is a decoded transaction marker.
type Marker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// BuildMarker returns a COMMIT or ABORT marker batch for producerID/epoch with base
// offset 0 (the leader assigns it) and timestamp ts (ms).
func BuildMarker(producerID int64, epoch int16, m Marker, ts int64) []byte {
	key := make([]byte, 4)
	if m.Commit {
		binary.BigEndian.PutUint16(key[2:], ControlCommit)
	}
	val := make([]byte, 6)
	binary.BigEndian.PutUint32(val[2:], uint32(m.CoordinatorEpoch))
	return Build(Options{
		Transactional: true,
		Control:       true,
		BaseTimestamp: ts,
		ProducerID:    producerID,
		ProducerEpoch: epoch,
		BaseSequence:  -1,
	}, Record{Key: key, Value: val})
}

// ParseMarker decodes the marker in a control batch (validated, uncompressed as
// markers always are). It fails on anything that is not one ABORT or COMMIT record.
func ParseMarker(batch []byte) (Marker, error) {
	var m Marker
	n := 0
	_, err := Records(batch, nil, func(r *Record) error {
		n++
		if n > 1 {
			return fmt.Errorf("%w: control batch with more than one record", ErrRecords)
		}
		if len(r.Key) < 4 || binary.BigEndian.Uint16(r.Key) != 0 {
			return fmt.Errorf("%w: control record key of %d bytes", ErrRecords, len(r.Key))
		}
		switch t := binary.BigEndian.Uint16(r.Key[2:]); t {
		case ControlAbort, ControlCommit:
			m.Commit = t == ControlCommit
		default:
			return fmt.Errorf("%w: control record type %d is not a transaction marker", ErrRecords, t)
		}
		if len(r.Value) >= 6 {
			m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
		}
		return nil
	})
	if err == nil && n == 0 {
		err = fmt.Errorf("%w: control batch with no record", ErrRecords)
	}
	return m, err
}
