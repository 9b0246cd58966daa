package wasm

import (
	"context"
	"math"

	"github.com/tetratelabs/wazero/api"
)

// Host side of Redpanda's data transform ABI (import module
// redpanda_transform, as used by its transform SDKs) and a stub of its schema
// registry module.
//
// Mapping to our batches:
//
//   - read_batch_header completes the previous batch, waits for the next one
//     and writes its header fields with the widths Redpanda's host writes:
//     base_offset i64, record_count i32, partition_leader_epoch i32 (always 0:
//     we have none), attributes i16, last_offset_delta i32, base_timestamp
//     i64, max_timestamp i64, producer_id i64, producer_epoch i16,
//     base_sequence i32. (The Go SDK declares some of these as int, 64 bits on
//     wasm; it zero-initialises them and the values are non-negative, so its
//     upper halves stay zero.) It returns the largest record payload.
//
//   - read_next_record writes the record's attributes (u8), absolute
//     timestamp (i64 ms, base_timestamp + timestampDelta) and offset (i64:
//     base_offset + offsetDelta; inline, where base_offset is -1 because the
//     offsets are not assigned yet, the offsetDelta alone), then the payload
//     (key, value, headers in Kafka encoding), and returns its length.
//
//   - write_record and write_record_with_options parse a payload and add it to
//     the batch's output, with the timestamp of the last record read, and
//     return the number of bytes consumed. Option 0x01 names the output topic:
//     one of Config.OutputTopics (derived), or the input topic (inline).
//
//   - check_abi_version_3 and read_batch_metadata(key, buf, buf_len) are
//     Redpanda's ABI v3 (its SDKs for Redpanda 25.2 and later): the value of
//     one metadata field of the current batch, as a string, is written to buf
//     and its length returned; 0 when the field is not present (empty, an
//     unknown key, or one we do not have). Keys (Redpanda's numbering):
//     1 principal_name, 2 principal_type, 3 client_id, from Batch.Source;
//     4 client_host, 5 client_port, 6 tls_enabled are never present. Outside a
//     batch it returns rpErrNoBatch; with buf_len shorter than the value,
//     rpErrShortBuf, writing nothing (a truncated principal would be a wrong
//     one).
//
// Errors return these codes (and, for writes, fail the batch as KindMalformed);
// buffers out of bounds in read_batch_header and read_next_record trap.
const (
	rpErrNoBatch   = -1 // no batch, or no record read yet
	rpErrNoRecord  = -2 // all records of the batch were read
	rpErrShortBuf  = -3 // buffer smaller than the payload
	rpErrMalformed = -4 // malformed payload or options
	rpErrTooLarge  = -5 // output exceeds MaxOutputBytes
	rpErrTopic     = -6 // unknown output topic
	srErrNoSupport = -1 // schema registry is not supported
)

var redpandaFuncs = []hostFunc{
	{"check_abi_version_2", nil, nil, func(context.Context, api.Module, []uint64) {}},
	{"check_abi_version_3", nil, nil, func(context.Context, api.Module, []uint64) {}},
	{"read_batch_metadata", types(i32, i32, i32), types(i32), rpReadBatchMetadata},
	{"read_batch_header", types(i32, i32, i32, i32, i32, i32, i32, i32, i32, i32), types(i32), rpReadBatchHeader},
	{"read_next_record", types(i32, i32, i32, i32, i32), types(i32), rpReadNextRecord},
	{"write_record", types(i32, i32), types(i32), rpWriteRecord},
	{"write_record_with_options", types(i32, i32, i32, i32), types(i32), rpWriteRecordWithOptions},
}

func srUnsupported(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = api.EncodeI32(srErrNoSupport)
}

var schemaRegistryFuncs = []hostFunc{
	// The Go SDK calls this from sr.NewClient; lookups then fail.
	{"check_abi_version_0", nil, nil, func(context.Context, api.Module, []uint64) {}},
	{"get_schema_definition_len", types(i32, i32), types(i32), srUnsupported},
	{"get_schema_definition", types(i32, i32, i32), types(i32), srUnsupported},
	{"get_subject_schema_len", types(i32, i32, i32, i32), types(i32), srUnsupported},
	{"get_subject_schema", types(i32, i32, i32, i32, i32), types(i32), srUnsupported},
	{"create_subject_schema", types(i32, i32, i32, i32, i32), types(i32), srUnsupported},
}

// read_batch_header(base_offset, record_count, partition_leader_epoch,
// attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id,
// producer_epoch, base_sequence: pointers) -> max payload size
func rpReadBatchHeader(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	if inst.cur != nil && inst.delivered {
		inst.complete()
	}
	var maxPayload int
	for {
		if inst.cur == nil {
			inst.wait()
		}
		var err error
		inst.recs, maxPayload, err = parseRecords(inst.cur.batch.Records, inst.recs)
		if err == nil && len(inst.recs) != int(inst.cur.batch.RecordCount) {
			err = errMalformed
		}
		if err != nil {
			inst.answer(nil, &Error{Kind: KindMalformed, Msg: "input records: " + err.Error()})
			continue
		}
		break
	}
	b := inst.cur.batch
	var lastOffsetDelta int32
	if n := len(inst.recs); n > 0 {
		lastOffsetDelta = inst.recs[n-1].offDelta
	}
	mem := mod.Memory()
	p := func(i int) uint32 { return api.DecodeU32(stack[i]) }
	if !mem.WriteUint64Le(p(0), uint64(b.BaseOffset)) ||
		!mem.WriteUint32Le(p(1), uint32(b.RecordCount)) ||
		!mem.WriteUint32Le(p(2), 0) ||
		!mem.WriteUint16Le(p(3), uint16(b.Attributes)) ||
		!mem.WriteUint32Le(p(4), uint32(lastOffsetDelta)) ||
		!mem.WriteUint64Le(p(5), uint64(b.BaseTimestamp)) ||
		!mem.WriteUint64Le(p(6), uint64(b.MaxTimestamp)) ||
		!mem.WriteUint64Le(p(7), uint64(b.ProducerID)) ||
		!mem.WriteUint16Le(p(8), uint16(b.ProducerEpoch)) ||
		!mem.WriteUint32Le(p(9), uint32(b.BaseSequence)) {
		panic(trapf("read_batch_header: pointer out of bounds"))
	}
	inst.delivered = true
	inst.next = 0
	inst.tsDelta = 0
	stack[0] = api.EncodeI32(int32(maxPayload))
}

// Redpanda's read_batch_metadata keys (ABI v3).
const (
	rpMetaPrincipalName = 1
	rpMetaPrincipalType = 2
	rpMetaClientID      = 3
)

// read_batch_metadata(key, buf: pointer, buf_len) -> value length, 0 if absent
func rpReadBatchMetadata(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	if inst.cur == nil || !inst.delivered {
		stack[0] = api.EncodeI32(rpErrNoBatch)
		return
	}
	key, ptr, n := api.DecodeI32(stack[0]), api.DecodeU32(stack[1]), api.DecodeI32(stack[2])
	src := &inst.cur.batch.Source
	var v string
	switch key {
	case rpMetaPrincipalName:
		v = src.PrincipalName
	case rpMetaPrincipalType:
		v = src.PrincipalType
	case rpMetaClientID:
		v = src.ClientID
	}
	switch {
	case v == "":
		stack[0] = 0
	case int64(n) < int64(len(v)) || len(v) > math.MaxInt32:
		stack[0] = api.EncodeI32(rpErrShortBuf)
	default:
		if !mod.Memory().WriteString(ptr, v) {
			panic(trapf("read_batch_metadata: buffer [%d, +%d) out of bounds", ptr, len(v)))
		}
		stack[0] = api.EncodeI32(int32(len(v)))
	}
}

// read_next_record(attributes, timestamp, offset, buf: pointers, len) -> payload length
func rpReadNextRecord(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	if inst.cur == nil || !inst.delivered {
		stack[0] = api.EncodeI32(rpErrNoBatch)
		return
	}
	if inst.next >= len(inst.recs) {
		stack[0] = api.EncodeI32(rpErrNoRecord)
		return
	}
	b := inst.cur.batch
	r := inst.recs[inst.next]
	payload := b.Records[r.payload[0]:r.payload[1]]
	if int64(len(payload)) > int64(api.DecodeI32(stack[4])) {
		stack[0] = api.EncodeI32(rpErrShortBuf)
		return
	}
	offset := int64(r.offDelta)
	if b.BaseOffset >= 0 {
		offset += b.BaseOffset
	}
	mem := mod.Memory()
	if !mem.WriteByte(api.DecodeU32(stack[0]), r.attrs) ||
		!mem.WriteUint64Le(api.DecodeU32(stack[1]), uint64(b.BaseTimestamp+r.tsDelta)) ||
		!mem.WriteUint64Le(api.DecodeU32(stack[2]), uint64(offset)) ||
		!mem.Write(api.DecodeU32(stack[3]), payload) {
		panic(trapf("read_next_record: pointer out of bounds"))
	}
	inst.next++
	inst.tsDelta = r.tsDelta
	stack[0] = api.EncodeI32(int32(len(payload)))
}

// write_record(buf, len) -> len
func rpWriteRecord(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	stack[0] = api.EncodeI32(inst.rpWrite(mod, api.DecodeU32(stack[0]), api.DecodeI32(stack[1]), 0))
}

// write_record_with_options(buf, len, opts, opts_len) -> len
func rpWriteRecordWithOptions(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeI32(stack[1])
	optPtr, optN := api.DecodeU32(stack[2]), api.DecodeI32(stack[3])
	if inst.cur == nil || !inst.delivered || inst.next == 0 {
		stack[0] = api.EncodeI32(rpErrNoBatch)
		return
	}
	idx, errno := inst.rpOptions(mod, optPtr, optN)
	if errno != 0 {
		stack[0] = api.EncodeI32(errno)
		return
	}
	stack[0] = api.EncodeI32(inst.rpWrite(mod, ptr, n, idx))
}

// rpOptions parses write options (key u8, then key-specific data) and returns
// the output index.
func (inst *instance) rpOptions(mod api.Module, ptr uint32, n int32) (int, int32) {
	o := &inst.out
	if o.err != nil {
		return 0, o.errno
	}
	if n < 0 {
		return 0, o.fail(rpErrMalformed, "write options: negative length")
	}
	b, ok := mod.Memory().Read(ptr, uint32(n))
	if !ok {
		return 0, o.fail(rpErrMalformed, "write options out of bounds")
	}
	idx := 0
	for i := 0; i < len(b); {
		key := b[i]
		i++
		if key != 0x01 {
			return 0, o.fail(rpErrMalformed, "unknown write option")
		}
		l, j, err := readVarint(b, i)
		if err != nil || l < 0 || int(l) > len(b)-j {
			return 0, o.fail(rpErrMalformed, "malformed write option")
		}
		topic := b[j : j+int(l)]
		i = j + int(l)
		found := false
		if inst.pool.cfg.OutputTopics == nil {
			found = string(topic) == inst.pool.cfg.InputTopic
			idx = 0
		} else {
			for k, t := range inst.pool.cfg.OutputTopics {
				if string(topic) == t {
					idx, found = k, true
					break
				}
			}
		}
		if !found {
			return 0, o.fail(rpErrTopic, "write to unknown output topic "+truncate(string(topic), 256))
		}
	}
	return idx, 0
}

func (inst *instance) rpWrite(mod api.Module, ptr uint32, n int32, idx int) int32 {
	if inst.cur == nil || !inst.delivered || inst.next == 0 {
		return rpErrNoBatch
	}
	b, errno := inst.outputBytes(mod, ptr, n, "write_record", rpErrMalformed, rpErrTooLarge)
	if errno != 0 {
		return errno
	}
	o := &inst.out
	if err := o.appendPayload(b, idx, inst.tsDelta); err != nil {
		return o.fail(rpErrMalformed, "write_record: malformed payload")
	}
	o.size += int(n)
	return n
}
