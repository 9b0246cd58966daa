package sharepart

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzOps has two modes, chosen by the high bit of the first byte.
//
// Clear: the input drives a partition and the model with operations (the log
// layout comes from a generator seeded by the first byte): no panic, the
// invariants hold, and the two agree after every step.
//
// Set: the rest of the input is a snapshot (see decodeSnapshot) to restore,
// followed on success by operations with extreme offsets: an error or a
// partition keeping its invariants, never a panic, and a snapshot that restores
// to itself.
func FuzzOps(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{1, 10, 0, 0, 0, 30, 1, 40, 0, 0})
	f.Add([]byte("\x02\x05\x01\x00\x00\x03\x14\x01\x00\x32\x00\x00\x01\x00\x50\x00\x00\x46\x00\x60\x90\x00"))
	for _, s := range []Snapshot{
		{StartOffset: 10, Batches: []StateBatch{{10, 11, Available, 1}, {12, 13, Acknowledged, 1}, {15, 15, Archived, 2}}},
		{StartOffset: 5, Batches: []StateBatch{{5, 6, Acknowledged, 1}, {7, 9, Available, 9}}},
		{StartOffset: math.MaxInt64 - 10, Batches: []StateBatch{{math.MaxInt64 - 5, math.MaxInt64 - 1, Available, 1}}},
		{StartOffset: -1},
	} {
		f.Add(append([]byte{0x80}, encodeSnapshot(s)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 0 && data[0]&0x80 != 0 {
			fuzzRestore(t, data[1:])
			return
		}
		fuzzOps(t, data)
	})
}

var fuzzConfigs = []Config{
	{LockDuration: 10e9, DeliveryLimit: 2, MaxLocks: 12, MaxInFlight: 30},
	{LockDuration: 3e9, DeliveryLimit: 1, MaxLocks: 5, MaxInFlight: 100},
	{LockDuration: 20e9, DeliveryLimit: 4, MaxLocks: 40, MaxInFlight: 40},
}

func fuzzOps(t *testing.T, data []byte) {
	var seed byte
	if len(data) > 0 {
		seed, data = data[0], data[1:]
	}
	src := &byteSource{b: data}
	s := newSim(t, src, rngSource{rand.New(rand.NewPCG(uint64(seed), 1))}, fuzzConfigs[int(seed)%len(fuzzConfigs)])
	for i := 0; i < 2000 && !src.exhausted; i++ {
		s.doStep()
	}
	s.takeArchived()
}

func fuzzRestore(t *testing.T, data []byte) {
	cfg := Config{DeliveryLimit: 3, MaxLocks: 50, MaxInFlight: 1 << 40}
	p, err := Restore(cfg, decodeSnapshot(data))
	if err != nil {
		return
	}
	checkInvariants(t, p)
	s := p.Snapshot()
	q, err := Restore(cfg, s)
	if err != nil {
		t.Fatalf("restore of a snapshot %+v: %v", s, err)
	}
	if s2 := q.Snapshot(); s2.StartOffset != s.StartOffset || !slices.Equal(s2.Batches, s.Batches) || q.Version() != 0 {
		t.Fatalf("snapshot %+v restored as %+v, version %d", s, s2, q.Version())
	}
	start, end := p.StartOffset(), p.EndOffset()
	edges := []int64{0, start - 1, start, end - 1, end, end + 1, math.MaxInt64 - 1, math.MaxInt64, -1, math.MinInt64}
	for i, a := range edges {
		for j, b := range edges {
			bs := []Batch{{First: a, Last: b, Skip: (i+j)%3 == 0}, {First: b, Last: b + 2}}
			p.Acquire("m", a, bs, 7+i, j%2 == 0, t0)
			checkInvariants(t, p)
			_ = p.Acknowledge("m", []AckBatch{{First: a, Last: b, Types: []AckType{AckType(i % 5)}}}, t0)
			checkInvariants(t, p)
		}
	}
	p.FetchOffset()
	p.Tick(t0.Add(lock))
	checkInvariants(t, p)
	p.AdvanceStart(end + 5)
	checkInvariants(t, p)
	p.AdvanceStart(math.MaxInt64)
	checkInvariants(t, p)
	p.Reset(math.MaxInt64 - 1)
	p.Acquire("m", math.MaxInt64-1, []Batch{{math.MaxInt64 - 1, math.MaxInt64 - 1, false}}, 1, true, t0)
	checkInvariants(t, p)
}

// encodeSnapshot and decodeSnapshot give FuzzOps's restore mode its input format: the
// start offset, then per batch first, last (int64), state (int8) and count (int16),
// little endian.
func encodeSnapshot(s Snapshot) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(s.StartOffset))
	for _, x := range s.Batches {
		b = binary.LittleEndian.AppendUint64(b, uint64(x.First))
		b = binary.LittleEndian.AppendUint64(b, uint64(x.Last))
		b = append(b, byte(x.State))
		b = binary.LittleEndian.AppendUint16(b, uint16(x.DeliveryCount))
	}
	return b
}

func decodeSnapshot(b []byte) Snapshot {
	var s Snapshot
	if len(b) < 8 {
		return s
	}
	s.StartOffset, b = int64(binary.LittleEndian.Uint64(b)), b[8:]
	for len(b) >= 19 {
		s.Batches = append(s.Batches, StateBatch{
			First:         int64(binary.LittleEndian.Uint64(b)),
			Last:          int64(binary.LittleEndian.Uint64(b[8:])),
			State:         State(b[16]),
			DeliveryCount: int16(binary.LittleEndian.Uint16(b[17:])),
		})
		b = b[19:]
	}
	return s
}
