package wasm

import (
	"context"
	"encoding/binary"
	"math"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// Host side of sdk-wasm/ABI.md, import module sluice_transform_v1.

// emit errnos (ABI.md).
const (
	errnoMalformed = -1
	errnoTooLarge  = -2
	errnoIndex     = -3
	errnoNoBatch   = -4
)

const (
	inputVersion    = 1
	inputHeaderSize = 54
	maxFailMsg      = 1024
)

// batch_source errnos (ABI.md); -len (at most -sourceMinSize) asks for a larger
// buffer.
const (
	errnoSourceTooLarge = -2 // a field longer than the encoding's u16 length
	errnoSourceNoBatch  = -4 // outside a batch
)

// sourceMinSize is the length of the source encoding with three empty fields.
const sourceMinSize = 6

// abiMinor is the highest minor version check_abi accepts: 1, plus batch_source
// in 2.
const abiMinor = 2

var sluiceFuncs = []hostFunc{
	{"check_abi", types(i32), types(i32), sluiceCheckABI},
	{"next_batch", types(i32, i32), types(i32), sluiceNextBatch},
	{"emit", types(i32, i32), types(i32), sluiceEmit},
	{"fail", types(i32, i32), nil, sluiceFail},
	{"batch_source", types(i32, i32), types(i32), sluiceBatchSource},
}

// check_abi(version i32) -> i32
func sluiceCheckABI(_ context.Context, _ api.Module, stack []uint64) {
	if v := api.DecodeI32(stack[0]); v >= 1 && v <= abiMinor {
		stack[0] = 0
	} else {
		stack[0] = api.EncodeI32(-1)
	}
}

// batch_source(buf i32, cap i32) -> i32: writes the current batch's source
// (principal type, principal name, client id; each a u16 length and its bytes)
// and returns its length; -len if cap is too small (nothing written),
// errnoSourceNoBatch outside a batch, errnoSourceTooLarge if a field does not
// fit its u16 length. A buffer out of bounds traps the guest.
func sluiceBatchSource(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	ptr, capacity := api.DecodeU32(stack[0]), api.DecodeI32(stack[1])
	if inst.cur == nil || !inst.delivered {
		stack[0] = api.EncodeI32(errnoSourceNoBatch)
		return
	}
	src := &inst.cur.batch.Source
	fields := [3]string{src.PrincipalType, src.PrincipalName, src.ClientID}
	need := sourceMinSize
	for _, f := range fields {
		if len(f) > math.MaxUint16 {
			stack[0] = api.EncodeI32(errnoSourceTooLarge)
			return
		}
		need += len(f)
	}
	if int64(capacity) < int64(need) {
		stack[0] = api.EncodeI32(-int32(need))
		return
	}
	b := inst.scratch[:0]
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	inst.scratch = b
	if !mod.Memory().Write(ptr, b) {
		panic(trapf("batch_source: buffer [%d, +%d) out of bounds", ptr, need))
	}
	stack[0] = api.EncodeI32(int32(need))
}

// next_batch(buf i32, cap i32) -> i32: completes the previous batch, waits for
// the next and writes it in the input encoding; -len if cap is too small (the
// same batch is offered again). A buffer out of bounds traps the guest.
func sluiceNextBatch(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	ptr, capacity := api.DecodeU32(stack[0]), api.DecodeI32(stack[1])
	if inst.cur != nil && inst.delivered {
		inst.complete()
	}
	for {
		if inst.cur == nil {
			inst.wait()
		}
		b := inst.cur.batch
		need := inputHeaderSize + len(b.Topic) + len(b.Records)
		if len(b.Topic) > math.MaxUint16 || need > math.MaxInt32 {
			inst.answer(nil, &Error{Kind: KindMalformed, Msg: "input batch too large for the guest ABI"})
			continue
		}
		if int64(capacity) < int64(need) {
			stack[0] = api.EncodeI32(-int32(need))
			return
		}
		h := append(inst.scratch[:0], make([]byte, inputHeaderSize)...)
		binary.LittleEndian.PutUint32(h[0:], inputVersion)
		binary.LittleEndian.PutUint32(h[4:], uint32(b.Partition))
		binary.LittleEndian.PutUint64(h[8:], uint64(b.BaseOffset))
		binary.LittleEndian.PutUint64(h[16:], uint64(b.BaseTimestamp))
		binary.LittleEndian.PutUint64(h[24:], uint64(b.MaxTimestamp))
		binary.LittleEndian.PutUint16(h[32:], uint16(b.Attributes))
		binary.LittleEndian.PutUint16(h[34:], uint16(b.ProducerEpoch))
		binary.LittleEndian.PutUint64(h[36:], uint64(b.ProducerID))
		binary.LittleEndian.PutUint32(h[44:], uint32(b.BaseSequence))
		binary.LittleEndian.PutUint32(h[48:], uint32(b.RecordCount))
		binary.LittleEndian.PutUint16(h[52:], uint16(len(b.Topic)))
		h = append(h, b.Topic...)
		inst.scratch = h
		mem := mod.Memory()
		if uint64(ptr)+uint64(need) > uint64(mem.Size()) ||
			!mem.Write(ptr, h) || !mem.Write(ptr+uint32(len(h)), b.Records) {
			panic(trapf("next_batch: buffer [%d, +%d) out of bounds", ptr, need))
		}
		inst.delivered = true
		stack[0] = api.EncodeI32(int32(need))
		return
	}
}

// emit(buf i32, len i32) -> i32
func sluiceEmit(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeI32(stack[1])
	stack[0] = api.EncodeI32(inst.emit(mod, ptr, n))
}

func (inst *instance) emit(mod api.Module, ptr uint32, n int32) int32 {
	if inst.cur == nil || !inst.delivered {
		return errnoNoBatch
	}
	b, errno := inst.outputBytes(mod, ptr, n, "emit", errnoMalformed, errnoTooLarge)
	if errno != 0 {
		return errno
	}
	o := &inst.out
	o.size += int(n)
	return o.appendRecords(b, inst.pool.outputs)
}

// outputBytes reads the n bytes at ptr that an output call (emit, write_record) hands
// over, once the output has not failed and n fits its length and size limits. errno is
// 0 when it returns them, else what the call returns to the guest: the output's first
// failure, or malformed or tooLarge (the calling ABI's codes, never 0), which fail it.
func (inst *instance) outputBytes(mod api.Module, ptr uint32, n int32, call string, malformed, tooLarge int32) (b []byte, errno int32) {
	o := &inst.out
	if o.err != nil {
		return nil, o.errno
	}
	if n < 0 {
		return nil, o.fail(malformed, call+": negative length")
	}
	if o.size+int(n) > inst.pool.cfg.MaxOutputBytes {
		return nil, o.fail(tooLarge, "output exceeds max_output_bytes")
	}
	b, ok := mod.Memory().Read(ptr, uint32(n))
	if !ok {
		return nil, o.fail(malformed, call+": buffer out of bounds")
	}
	return b, 0
}

// fail(msg i32, len i32): fails the current batch (KindFailed); the instance
// lives on. Outside a batch it is ignored.
func sluiceFail(ctx context.Context, mod api.Module, stack []uint64) {
	inst := instanceOf(ctx)
	ptr, n := api.DecodeU32(stack[0]), api.DecodeI32(stack[1])
	if inst.cur == nil || !inst.delivered {
		return
	}
	inst.answer(nil, &Error{Kind: KindFailed, Msg: readMessage(mod, ptr, n)})
}

func readMessage(mod api.Module, ptr uint32, n int32) string {
	if n < 0 {
		return "(invalid message)"
	}
	b, ok := mod.Memory().Read(ptr, uint32(min(n, maxFailMsg)))
	if !ok {
		return "(message out of bounds)"
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
