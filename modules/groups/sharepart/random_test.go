package sharepart

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// source makes the simulation's choices: a seeded generator, or fuzz bytes.
type source interface {
	intn(n int) int // in [0, n); n > 0
}

type rngSource struct{ r *rand.Rand }

func (s rngSource) intn(n int) int { return s.r.IntN(n) }

// byteSource reads choices from fuzz input; once it runs out every choice is 0
// and exhausted is set.
type byteSource struct {
	b         []byte
	exhausted bool
}

func (s *byteSource) intn(n int) int {
	if len(s.b) == 0 {
		s.exhausted = true
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	if n > 256 && len(s.b) > 0 {
		v = v<<8 | int(s.b[0])
		s.b = s.b[1:]
	}
	return v % n
}

// sim drives a Partition and the model with the same operations, as a broker
// would with several members, over a log with compacted holes and control
// batches, and compares them after every step.
type sim struct {
	t        testing.TB
	src      source
	cfg      Config
	p        *Partition
	m        *model
	now      time.Time
	log      []Batch
	logStart int64
	members  []string
	accepted map[int64]bool // offsets accepted since the last Reset
	checked  int64          // offsets below it were checked done
	step     int
	op       string         // the step's operation
	args     []any          // its arguments, shown on failure
	outcomes map[string]int // what the steps did, to tell the test covers enough
}

// newSim starts a simulation whose log layout comes from logSrc and whose
// operations come from src.
func newSim(t testing.TB, src, logSrc source, cfg Config) *sim {
	s := &sim{t: t, src: src, cfg: cfg, p: New(cfg, 0), m: newModel(cfg, 0), now: t0,
		members: []string{"m1", "m2", "m3", "m4"}, accepted: map[int64]bool{}, outcomes: map[string]int{}}
	// The log: batches of 1-8 records, some control or aborted (Skip), with
	// compacted holes between some of them.
	for off := int64(0); off < 4000; {
		if logSrc.intn(8) == 0 {
			off += int64(1 + logSrc.intn(4))
		}
		n := int64(1 + logSrc.intn(8))
		s.log = append(s.log, Batch{First: off, Last: off + n - 1, Skip: logSrc.intn(10) == 0})
		off += n
	}
	return s
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("step %d (%s %v): %s\n%s", s.step, s.op, s.args, fmt.Sprintf(format, args...), s.p.dump())
}

// read returns up to n batches as a read of the log from offset from returns them.
func (s *sim) read(from int64, n int) []Batch {
	from = max(from, s.logStart)
	i, _ := slices.BinarySearchFunc(s.log, from, func(b Batch, off int64) int {
		if b.Last < off {
			return -1
		}
		return 1
	})
	return slices.Clone(s.log[i:min(i+n, len(s.log))])
}

// at is the time of the next call: usually the clock, sometimes a little earlier
// (a concurrent caller's older reading).
func (s *sim) at() time.Time {
	if s.src.intn(30) == 0 {
		return s.now.Add(-time.Second)
	}
	return s.now
}

// held returns the offsets member holds in the model.
func (s *sim) held(member string) []int64 {
	var os []int64
	for o := s.m.start; o < s.m.end; o++ {
		if r := s.m.recs[o]; r.state == Acquired && r.member == member {
			os = append(os, o)
		}
	}
	return os
}

func (s *sim) doStep() {
	s.step++
	s.args = nil
	vBefore, projBefore := s.p.Version(), s.m.projection()
	failover := false
	switch k := s.src.intn(100); {
	case k < 35:
		s.acquire()
	case k < 65:
		s.acknowledge()
	case k < 75:
		s.op = "tick"
		s.now = s.now.Add(time.Duration(s.src.intn(int(s.cfg.LockDuration/time.Millisecond))) * time.Millisecond)
		if d, ok := s.m.nextDeadline(); ok && d.After(s.now) && s.src.intn(3) == 0 {
			s.now = d // exactly at a deadline
		}
		s.p.Tick(s.now)
		s.m.advance(s.now)
	case k < 85:
		s.op = "time passes"
		s.now = s.now.Add(time.Duration(s.src.intn(5000)) * time.Millisecond)
	case k < 89:
		s.op = "release member"
		member, now := s.members[s.src.intn(len(s.members))], s.at()
		s.p.ReleaseMember(member, now)
		s.m.releaseMember(member, now)
	case k < 95:
		s.op = "take archived at limit"
		s.takeArchived()
	case k < 97:
		s.op = "advance start"
		s.logStart = max(s.logStart, s.m.start-3+int64(s.src.intn(15)))
		s.p.AdvanceStart(s.logStart)
		s.m.advanceStart(s.logStart)
	case k < 99:
		s.op = "failover"
		s.takeArchived()
		snap := s.p.Snapshot()
		q, err := Restore(s.cfg, snap)
		if err != nil {
			s.fatalf("restore of %+v: %v", snap, err)
		}
		s.p = q
		s.m.failover()
		failover = true
	default:
		s.op = "reset"
		for _, m := range s.members {
			s.p.ReleaseMember(m, s.now)
			s.m.releaseMember(m, s.now)
		}
		s.takeArchived()
		off := s.m.start - 20 + int64(s.src.intn(40))
		vBefore, projBefore = s.p.Version(), s.m.projection()
		s.p.Reset(off)
		s.m.reset(off)
		clear(s.accepted)
		s.checked = s.m.start
	}
	s.compare()
	want := vBefore
	if !projBefore.equal(s.m.projection()) {
		want++
	}
	if failover { // a restored partition is at version 0, or 1 if it differs from the snapshot
		want -= vBefore
	}
	if v := s.p.Version(); v != want {
		s.fatalf("version %d, want %d (snapshot %v -> %v)", v, want, projBefore, s.m.projection())
	}
	// Every offset below SPSO was accepted, rejected, gap'd, skipped, absent from
	// the log, archived at the delivery limit or truncated by AdvanceStart.
	for ; s.checked < s.m.start; s.checked++ {
		if s.m.reason[s.checked] == "" {
			s.fatalf("offset %d below SPSO %d without a reason to be done", s.checked, s.m.start)
		}
	}
}

func (s *sim) acquire() {
	s.op = "acquire"
	member := s.members[s.src.intn(len(s.members))]
	from, ok := s.p.FetchOffset()
	if s.src.intn(10) == 0 {
		from = s.m.start - 5 + int64(s.src.intn(int(s.m.end-s.m.start)+10))
	}
	if !ok && s.src.intn(3) != 0 {
		return
	}
	bs := s.read(from, 1+s.src.intn(6))
	switch s.src.intn(25) {
	case 0: // a dishonest read leaving a batch out: its offsets are taken as absent
		if len(bs) > 2 {
			bs = slices.Delete(bs, 1, 2)
		}
	case 1: // malformed batches
		bs = append(bs, Batch{First: 10, Last: 5}, Batch{First: -3, Last: 2}, Batch{First: from, Last: from + 3})
	}
	maxRecords, aligned, now := s.src.intn(40), s.src.intn(2) == 0, s.at()
	s.args = []any{member, "from", from, bs, "max", maxRecords, "aligned", aligned}
	// Offsets held by others, and accepted ones, must not be acquired.
	s.m.advance(now)
	holders := map[int64]string{}
	for o, r := range s.m.recs {
		if r.state == Acquired {
			holders[o] = r.member
		}
	}
	got := s.p.Acquire(member, from, bs, maxRecords, aligned, now)
	want := s.m.acquire(member, from, bs, maxRecords, aligned, now)
	if !slices.Equal(got, want) {
		s.fatalf("acquired %v, model %v", got, want)
	}
	if got == nil {
		s.outcomes["acquire nothing"]++
	} else {
		s.outcomes["acquire"]++
	}
	var n int64
	for i, r := range got {
		if r.First > r.Last || i > 0 && r.First <= got[i-1].Last {
			s.fatalf("acquired ranges %v not ascending", got)
		}
		for o := r.First; o <= r.Last; o++ {
			if h, ok := holders[o]; ok {
				s.fatalf("offset %d acquired by %s while %s holds it", o, member, h)
			}
			if s.accepted[o] {
				s.fatalf("accepted offset %d acquired again", o)
			}
			n++
		}
	}
	if !aligned && n > int64(maxRecords) {
		s.fatalf("acquired %d records, max %d", n, maxRecords)
	}
}

func (s *sim) acknowledge() {
	member := s.members[s.src.intn(len(s.members))]
	held := s.held(member)
	var acks []AckBatch
	// Up to three batches of consecutive held offsets.
	for i := 0; i < len(held) && len(acks) < 3; {
		i += s.src.intn(3)
		if i >= len(held) {
			break
		}
		j := i
		for j+1 < len(held) && held[j+1] == held[j]+1 && s.src.intn(6) != 0 {
			j++
		}
		a := AckBatch{First: held[i], Last: held[j]}
		if s.src.intn(3) == 0 {
			for range j - i + 1 {
				a.Types = append(a.Types, AckType(s.src.intn(5)))
			}
		} else {
			a.Types = []AckType{AckType(s.src.intn(5))}
		}
		acks = append(acks, a)
		i = j + 2
	}
	invalid := s.src.intn(8)
	switch invalid {
	case 0: // offsets this member may not hold
		f := s.m.start - 2 + int64(s.src.intn(int(s.m.end-s.m.start)+4))
		acks = append(acks, AckBatch{First: f, Last: f + int64(s.src.intn(3)), Types: []AckType{Accept}})
		slices.SortFunc(acks, func(a, b AckBatch) int { return int(a.First - b.First) })
	case 1:
		if len(acks) > 0 {
			acks[0].Types = append(acks[0].Types, Accept, Reject)
		}
	case 2:
		if len(acks) > 0 {
			acks[len(acks)-1].Types[0] = AckType(5 + s.src.intn(3))
		}
	case 3:
		if len(acks) > 1 {
			acks[0], acks[1] = acks[1], acks[0]
		}
	}
	now := s.at()
	s.op, s.args = "ack", []any{member, acks}
	errP := s.p.Acknowledge(member, acks, now)
	errM := s.m.ack(member, acks, now)
	if errKind(errP) != errKind(errM) {
		s.fatalf("error %v, model %v", errP, errM)
	}
	s.outcomes["ack "+errKind(errP)]++
	if errP != nil {
		return
	}
	for _, a := range acks {
		for o := a.First; o <= a.Last; o++ {
			if t := a.Types[min(int(o-a.First), len(a.Types)-1)]; t == Accept {
				s.accepted[o] = true
			}
		}
	}
}

func (s *sim) takeArchived() {
	var got []Range
	for _, r := range s.p.TakeArchivedAtLimit() {
		for o := r.First; o <= r.Last; o++ {
			got = append(got, Range{o, o, r.DeliveryCount})
		}
	}
	if !slices.Equal(got, s.m.atLimit) {
		s.fatalf("archived at limit %v, model %v", got, s.m.atLimit)
	}
	s.outcomes["archived at limit"] += len(got)
	s.m.atLimit = nil
}

// compare fails unless the partition and the model agree on everything visible.
func (s *sim) compare() {
	s.t.Helper()
	if err := invariantError(s.p); err != nil {
		s.fatalf("invariant: %v", err)
	}
	p, m := s.p, s.m
	if p.StartOffset() != m.start || p.EndOffset() != m.end {
		s.fatalf("window [%d, %d), model [%d, %d)", p.StartOffset(), p.EndOffset(), m.start, m.end)
	}
	for i, st := range p.states(m.start, m.end-1) {
		o := m.start + int64(i)
		r := m.recs[o]
		if st.state != r.state || st.member != r.member || st.count != r.count || !st.deadline.Equal(r.deadline) {
			s.fatalf("offset %d: %+v, model %+v", o, st, *r)
		}
	}
	a, v, w := p.Stats()
	ma, mv, mw := m.stats()
	if a != ma || v != mv || w != mw {
		s.fatalf("stats %d %d %d, model %d %d %d", a, v, w, ma, mv, mw)
	}
	off, ok := p.FetchOffset()
	moff, mok := m.fetchOffset()
	if off != moff || ok != mok {
		s.fatalf("FetchOffset %d %v, model %d %v", off, ok, moff, mok)
	}
	d, ok := p.NextDeadline()
	md, mok := m.nextDeadline()
	if !d.Equal(md) || ok != mok {
		s.fatalf("NextDeadline %v %v, model %v %v", d, ok, md, mok)
	}
}

func TestRandomAgainstModel(t *testing.T) {
	configs := []Config{
		{LockDuration: 10 * time.Second, DeliveryLimit: 3, MaxLocks: 25, MaxInFlight: 60},
		{LockDuration: 5 * time.Second, DeliveryLimit: 1, MaxLocks: 8, MaxInFlight: 200},
		{LockDuration: 20 * time.Second, DeliveryLimit: 6, MaxLocks: 100, MaxInFlight: 100},
	}
	steps := 4000
	if testing.Short() {
		steps = 500
	}
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := configs[int(seed)%len(configs)]
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			rng := rngSource{rand.New(rand.NewPCG(seed, 932))}
			s := newSim(t, rng, rng, cfg)
			for range steps {
				s.doStep()
			}
			s.takeArchived()
			for _, k := range []string{"acquire", "acquire nothing", "ack nil", "ack INVALID_REQUEST", "ack INVALID_RECORD_STATE", "archived at limit"} {
				if s.outcomes[k] < 20 {
					t.Errorf("only %d steps of %q: %v", s.outcomes[k], k, s.outcomes)
				}
			}
			if s.m.end < 1000 {
				t.Errorf("the window reached only offset %d", s.m.end)
			}
		})
	}
}
