package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kafkahash"
	"github.com/sluicehq/sluice/kernel"
)

// Record format of __transaction_state (Kafka's; see doc.go): key kmsg.TxnMetadataKey
// version 0, value kmsg.TxnMetadataValue version 0; a tombstone (null value) forgets
// the id.

// keyVersion is the only key version of transaction records (Kafka's
// CoordinatorRecordType TRANSACTION_LOG). Records with another key version are not
// ours and are skipped on replay.
const keyVersion = 0

// Value versions: 0, the highest non-flexible version, which every Kafka since 0.11
// reads, is written for transactions of version 0; 1 (flexible, Kafka 4.0+) for those
// of transaction version 2, with its tagged fields: the previous producer id, the
// next one (a rotation in Prepare*) and the client's transaction version. Both are
// read.
const (
	valueVersion   = 0
	valueVersionV2 = 1
)

// errBadRecord: a __transaction_state record that does not decode.
var errBadRecord = errors.New("txn: undecodable __transaction_state record")

// errNotTxnRecord: a record whose key version is not a transaction record's.
var errNotTxnRecord = errors.New("txn: not a transaction record")

func encodeKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version = keyVersion
	k.TransactionalID = id
	return k.AppendTo(nil)
}

func encodeValue(d *txnData) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	if d.ClientTV >= 2 || d.Next != nil {
		v.Version = valueVersionV2
		v.PreviousProducerID = d.LastProducerID
		if d.Next != nil {
			v.NextProducerID = d.Next.id
		}
		v.ClientTransactionVersion = d.ClientTV
	}
	v.ProducerID = d.ProducerID
	v.ProducerEpoch = d.Epoch
	v.TimeoutMillis = d.TimeoutMs
	v.State = kmsg.TransactionState(d.State)
	v.LastUpdateTimestamp = d.UpdateMs
	v.StartTimestamp = d.StartMs
	if d.State != stEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{} // non-null; Empty leaves it null, as Kafka
		for _, tp := range d.Partitions {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewTxnMetadataValueTopic()
				t.Topic = tp.Topic
				v.Topics = append(v.Topics, t)
			}
			last := &v.Topics[len(v.Topics)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
	}
	return v.AppendTo(nil)
}

// decodeKey returns the transactional id of a record key, errNotTxnRecord for another
// key version, errBadRecord for garbage.
func decodeKey(b []byte) (string, error) {
	if len(b) < 2 {
		return "", fmt.Errorf("%w: key of %d bytes", errBadRecord, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != keyVersion {
		return "", fmt.Errorf("%w: key version %d", errNotTxnRecord, v)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(b); err != nil {
		return "", fmt.Errorf("%w: key: %v", errBadRecord, err)
	}
	return k.TransactionalID, nil
}

// decodeValue decodes a value (versions 0 and 1).
func decodeValue(b []byte) (txnData, error) {
	var v kmsg.TxnMetadataValue
	if len(b) < 2 {
		return txnData{}, fmt.Errorf("%w: value of %d bytes", errBadRecord, len(b))
	}
	if ver := int16(binary.BigEndian.Uint16(b)); ver < 0 || ver > 1 {
		return txnData{}, fmt.Errorf("%w: value version %d", errBadRecord, ver)
	}
	if err := v.ReadFrom(b); err != nil {
		return txnData{}, fmt.Errorf("%w: value: %v", errBadRecord, err)
	}
	st := txnState(v.State)
	if st < stEmpty || st > stPrepareEpochFence || v.ProducerID < 0 || v.TimeoutMillis <= 0 {
		return txnData{}, fmt.Errorf("%w: state %d, producer id %d, timeout %d", errBadRecord, v.State, v.ProducerID, v.TimeoutMillis)
	}
	d := txnData{
		ProducerID:     v.ProducerID,
		LastProducerID: -1,
		Epoch:          v.ProducerEpoch,
		LastEpoch:      -1,
		TimeoutMs:      v.TimeoutMillis,
		State:          st,
		StartMs:        v.StartTimestamp,
		UpdateMs:       v.LastUpdateTimestamp,
	}
	if v.Version >= 1 {
		if v.PreviousProducerID >= 0 {
			d.LastProducerID = v.PreviousProducerID
		}
		d.ClientTV = v.ClientTransactionVersion
		if v.NextProducerID >= 0 && st.isPrepare() && d.ClientTV >= 2 {
			d.Next = &pidEpoch{id: v.NextProducerID, epoch: 0}
		}
	}
	if st != stEmpty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				if p < 0 {
					continue
				}
				d.Partitions = append(d.Partitions, kernel.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		slices.SortFunc(d.Partitions, cmpTP)
		d.Partitions = slices.Compact(d.Partitions)
	}
	return d, nil
}

// partitionFor returns the __transaction_state partition of a transactional id (and,
// for AddOffsetsToTxn, the __consumer_offsets partition of a group), as Kafka
// computes it (internal/kafkahash).
func partitionFor(id string, n int32) int32 { return kafkahash.Partition(id, n) }
