package sharepart

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestNewDefaults(t *testing.T) {
	p := New(Config{}, 42)
	checkInvariants(t, p)
	wantWindow(t, p, 42, 42)
	want := Config{LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxLocks: 2000, MaxInFlight: 20000}
	if p.cfg != want {
		t.Fatalf("config %+v, want %+v", p.cfg, want)
	}
	if off, ok := p.FetchOffset(); off != 42 || !ok {
		t.Fatalf("FetchOffset = %d, %v", off, ok)
	}
	if _, ok := p.NextDeadline(); ok {
		t.Fatal("NextDeadline of an empty partition")
	}
	if a, v, w := p.Stats(); a != 0 || v != 0 || w != 0 {
		t.Fatalf("Stats = %d %d %d", a, v, w)
	}
	wantWindow(t, New(Config{}, -3), 0, 0)
	if c := New(Config{DeliveryLimit: 1 << 20}, 0).cfg.DeliveryLimit; c != math.MaxInt16 {
		t.Fatalf("DeliveryLimit clamped to %d", c)
	}
}

func TestStrings(t *testing.T) {
	for s, want := range map[State]string{Available: "AVAILABLE", Acquired: "ACQUIRED", Acknowledged: "ACKNOWLEDGED", Archived: "ARCHIVED", 3: "UNKNOWN"} {
		if s.String() != want {
			t.Errorf("State(%d) = %q, want %q", s, s.String(), want)
		}
	}
	for a, want := range map[AckType]string{Gap: "GAP", Accept: "ACCEPT", Release: "RELEASE", Reject: "REJECT", Renew: "RENEW", 9: "AckType(9)"} {
		if a.String() != want {
			t.Errorf("AckType(%d) = %q, want %q", a, a.String(), want)
		}
	}
}

func TestAcquire(t *testing.T) {
	type step struct {
		member       string
		from         int64
		batches      []Batch
		max          int
		recordLimit  bool
		want         []Range
		start, end   int64 // the window after
		acquired     int64
		fetch        int64
		fetchBlocked bool
	}
	tests := []struct {
		name  string
		cfg   Config
		start int64
		setup func(p *Partition) // before the steps
		steps []step
	}{{
		name:  "new records",
		start: 100,
		steps: []step{{member: "a", from: 100, batches: batches(100, 104, 105, 109), max: 500,
			want: []Range{{100, 109, 1}}, start: 100, end: 110, acquired: 10, fetch: 110}},
	}, {
		name: "batch aligned exceeds max records to the batch end",
		steps: []step{{member: "a", batches: batches(0, 4, 5, 9, 10, 14), max: 7,
			want: []Range{{0, 9, 1}}, end: 10, acquired: 10, fetch: 10}},
	}, {
		name: "record limit stops at max records",
		steps: []step{{member: "a", batches: batches(0, 4, 5, 9, 10, 14), max: 7, recordLimit: true,
			want: []Range{{0, 6, 1}}, end: 7, acquired: 7, fetch: 7}},
	}, {
		name: "batch aligned stops after the batch reaching max records",
		steps: []step{{member: "a", batches: batches(0, 4, 5, 9, 10, 14), max: 5,
			want: []Range{{0, 4, 1}}, end: 5, acquired: 5, fetch: 5}},
	}, {
		name: "batches may start before from",
		steps: []step{
			{member: "a", batches: batches(0, 2), max: 100, want: []Range{{0, 2, 1}}, end: 3, acquired: 3, fetch: 3},
			{member: "b", from: 3, batches: batches(0, 4, 5, 6), max: 100, want: []Range{{3, 6, 1}}, end: 7, acquired: 7, fetch: 7},
		},
	}, {
		name: "skip batches and log gaps archived",
		steps: []step{{member: "a", batches: []Batch{{0, 2, false}, {3, 3, true}, {6, 9, false}, {10, 10, true}}, max: 100,
			want: []Range{{0, 2, 1}, {6, 9, 1}}, end: 11, acquired: 7, fetch: 11}},
	}, {
		name: "leading gap and skip archived, SPSO moves over them",
		steps: []step{{member: "a", from: 0, batches: []Batch{{3, 4, true}, {5, 9, false}}, max: 100,
			want: []Range{{5, 9, 1}}, start: 5, end: 10, acquired: 5, fetch: 10}},
	}, {
		name: "only control records",
		steps: []step{{member: "a", from: 0, batches: []Batch{{0, 0, true}, {5, 5, true}}, max: 100,
			start: 6, end: 6, fetch: 6}},
	}, {
		name:  "unknown offsets between SPEO and from are not skipped",
		steps: []step{{member: "a", from: 5, batches: batches(5, 9), max: 100, start: 0, end: 0, fetch: 0}},
	}, {
		name: "max locks",
		cfg:  Config{MaxLocks: 5},
		steps: []step{
			{member: "a", batches: batches(0, 9), max: 100, want: []Range{{0, 4, 1}}, end: 5, acquired: 5, fetch: 5, fetchBlocked: true},
			{member: "b", from: 5, batches: batches(0, 9), max: 100, end: 5, acquired: 5, fetch: 5, fetchBlocked: true},
		},
	}, {
		name: "max in flight",
		cfg:  Config{MaxLocks: 100, MaxInFlight: 10},
		steps: []step{
			{member: "a", batches: batches(0, 7, 8, 15), max: 100, want: []Range{{0, 9, 1}}, end: 10, acquired: 10, fetch: 10, fetchBlocked: true},
		},
	}, {
		name: "max in flight caps skipped offsets too",
		cfg:  Config{MaxLocks: 100, MaxInFlight: 10},
		steps: []step{
			{member: "a", batches: []Batch{{0, 0, false}, {1, 30, true}, {31, 35, false}}, max: 100,
				want: []Range{{0, 0, 1}}, end: 10, acquired: 1, fetch: 10, fetchBlocked: true},
		},
	}, {
		name: "skipped offsets pass the bound while the window is all done",
		cfg:  Config{MaxLocks: 100, MaxInFlight: 10},
		steps: []step{
			{member: "a", batches: []Batch{{0, 99, true}, {100, 104, false}}, max: 100,
				want: []Range{{100, 104, 1}}, start: 100, end: 105, acquired: 5, fetch: 105},
		},
	}, {
		name: "in flight available offsets redelivered with their counts",
		setup: func(p *Partition) {
			p.Acquire("a", 0, batches(0, 9), 100, true, t0)
			if err := p.Acknowledge("a", []AckBatch{ack(0, 4, Release)}, t0); err != nil {
				panic(err)
			}
		},
		steps: []step{{member: "b", batches: batches(0, 9, 10, 14), max: 100,
			want: []Range{{0, 4, 2}, {10, 14, 1}}, end: 15, acquired: 15, fetch: 15}},
	}, {
		name: "in flight gaps between batches archived",
		setup: func(p *Partition) {
			p.Acquire("a", 0, batches(0, 9), 100, true, t0)
			if err := p.Acknowledge("a", []AckBatch{ack(0, 9, Release)}, t0); err != nil {
				panic(err)
			}
		},
		steps: []step{{member: "b", batches: batches(0, 2, 5, 9), max: 100,
			want: []Range{{0, 2, 2}, {5, 9, 2}}, end: 10, acquired: 8, fetch: 10}},
	}, {
		name: "in flight offsets compacted away before the first batch",
		setup: func(p *Partition) {
			p.Acquire("a", 0, batches(0, 9), 100, true, t0)
			if err := p.Acknowledge("a", []AckBatch{ack(0, 9, Release)}, t0); err != nil {
				panic(err)
			}
		},
		steps: []step{{member: "b", batches: batches(4, 9), max: 100,
			want: []Range{{4, 9, 2}}, start: 4, end: 10, acquired: 6, fetch: 10}},
	}, {
		name: "empty member or no records acquires nothing",
		steps: []step{
			{member: "", batches: batches(0, 9), max: 100, fetch: 0},
			{member: "a", batches: batches(0, 9), max: 0, fetch: 0},
		},
	}, {
		name: "malformed batches ignored",
		steps: []step{{member: "a", batches: []Batch{{-5, -1, false}, {3, 1, false}, {0, 4, false}, {2, 3, false}, {5, math.MaxInt64, false}, {5, 6, false}}, max: 100,
			want: []Range{{0, 6, 1}}, end: 7, acquired: 7, fetch: 7}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.cfg, tt.start)
			if tt.setup != nil {
				tt.setup(p)
			}
			checkInvariants(t, p)
			for i, s := range tt.steps {
				got := p.Acquire(s.member, s.from, s.batches, s.max, !s.recordLimit, t0)
				checkInvariants(t, p)
				if !slices.Equal(got, s.want) {
					t.Fatalf("step %d: acquired %v, want %v\n%s", i, got, s.want, p.dump())
				}
				wantWindow(t, p, s.start, s.end)
				if a, _, _ := p.Stats(); a != s.acquired {
					t.Fatalf("step %d: %d acquired, want %d", i, a, s.acquired)
				}
				if off, ok := p.FetchOffset(); off != s.fetch || ok == s.fetchBlocked {
					t.Fatalf("step %d: FetchOffset = %d, %v, want %d, %v", i, off, ok, s.fetch, !s.fetchBlocked)
				}
			}
		})
	}
}

func TestAcquireArchivesSkippedStates(t *testing.T) {
	p := New(Config{}, 0)
	got := p.Acquire("a", 0, []Batch{{0, 2, false}, {3, 3, true}, {6, 9, false}}, 100, true, t0)
	checkInvariants(t, p)
	wantRanges(t, "acquired", got, Range{0, 2, 1}, Range{6, 9, 1})
	wantStates(t, p, 3, 5, Archived, "", 0)
	if p.runCount() != 3 {
		t.Fatalf("%d runs\n%s", p.runCount(), p.dump())
	}
	mustAck(t, p, "a", t0, ack(0, 2, Accept))
	wantWindow(t, p, 6, 10)
	mustAck(t, p, "a", t0, ack(6, 9, Accept))
	wantWindow(t, p, 10, 10)
}

func TestAcquireMaxInFlightStuck(t *testing.T) {
	// One unacknowledged record holds SPSO; the window may not grow past it.
	p := New(Config{MaxInFlight: 10}, 0)
	acquire(t, p, "a", batches(0, 9), 100, t0)
	mustAck(t, p, "a", t0, ack(1, 9, Accept))
	wantWindow(t, p, 0, 10)
	if off, ok := p.FetchOffset(); off != 10 || ok {
		t.Fatalf("FetchOffset = %d, %v; want 10, false", off, ok)
	}
	if got := p.Acquire("b", 10, batches(10, 19), 100, true, t0); got != nil {
		t.Fatalf("acquired %v beyond the bound", got)
	}
	mustAck(t, p, "a", t0, ack(0, 0, Accept))
	wantWindow(t, p, 10, 10)
	wantRanges(t, "after SPSO moved", acquire(t, p, "b", batches(10, 19), 100, t0), Range{10, 19, 1})
}

func TestAcknowledge(t *testing.T) {
	tests := []struct {
		name        string
		acks        []AckBatch
		want        []State // offsets 0-9 after
		start       int64
		fetch       int64
		atLimit     bool // with a delivery limit of 1
		wantAtLimit []Range
	}{{
		name:  "accept all",
		acks:  []AckBatch{ack(0, 9, Accept)},
		start: 10, fetch: 10,
	}, {
		name:  "accept some",
		acks:  []AckBatch{ack(0, 3, Accept), ack(6, 7, Accept)},
		want:  []State{4: Acquired, Acquired, Acknowledged, Acknowledged, Acquired, Acquired},
		start: 4, fetch: 10,
	}, {
		name:  "release",
		acks:  []AckBatch{ack(2, 4, Release)},
		want:  []State{Acquired, Acquired, Available, Available, Available, Acquired, Acquired, Acquired, Acquired, Acquired},
		fetch: 2,
	}, {
		name:        "release at the delivery limit archives",
		acks:        []AckBatch{ack(2, 4, Release)},
		atLimit:     true,
		want:        []State{Acquired, Acquired, Archived, Archived, Archived, Acquired, Acquired, Acquired, Acquired, Acquired},
		fetch:       10,
		wantAtLimit: []Range{{2, 4, 1}},
	}, {
		name:  "reject and gap archive",
		acks:  []AckBatch{ack(0, 1, Reject), ack(2, 2, Gap), ack(5, 5, Reject)},
		want:  []State{3: Acquired, Acquired, Archived, Acquired, Acquired, Acquired, Acquired},
		start: 3, fetch: 10,
	}, {
		name:  "per offset types",
		acks:  []AckBatch{ack(0, 4, Accept, Accept, Release, Reject, Gap), ack(6, 6, Renew)},
		want:  []State{2: Available, Archived, Archived, Acquired, Acquired, Acquired, Acquired, Acquired},
		start: 2, fetch: 2,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if tt.atLimit {
				cfg.DeliveryLimit = 1
			}
			p := New(cfg, 0)
			acquire(t, p, "a", batches(0, 9), 100, t0)
			mustAck(t, p, "a", t0.Add(time.Second), tt.acks...)
			want := tt.want
			if want == nil {
				want = make([]State, 10)
			}
			for o := int64(0); o < 10; o++ {
				s := p.states(o, o)[0]
				if o < tt.start {
					if s.state != 0 || s.count != 0 {
						t.Fatalf("offset %d below SPSO %d: %+v", o, tt.start, s)
					}
					continue
				}
				if s.state != want[o] || s.count != 1 {
					t.Fatalf("offset %d: %v c=%d, want %v c=1\n%s", o, s.state, s.count, want[o], p.dump())
				}
			}
			wantWindow(t, p, tt.start, 10)
			if off, _ := p.FetchOffset(); off != tt.fetch {
				t.Fatalf("FetchOffset = %d, want %d", off, tt.fetch)
			}
			wantRanges(t, "archived at limit", p.TakeArchivedAtLimit(), tt.wantAtLimit...)
		})
	}
}

func TestAcknowledgeRenew(t *testing.T) {
	p := New(Config{}, 0)
	acquire(t, p, "a", batches(0, 9), 100, t0)
	v := p.Version()
	mustAck(t, p, "a", t0.Add(20*time.Second), ack(0, 4, Renew))
	if p.Version() != v {
		t.Fatal("a renewal moved the version")
	}
	if d, ok := p.NextDeadline(); !ok || !d.Equal(t0.Add(lock)) {
		t.Fatalf("NextDeadline = %v, %v", d, ok)
	}
	p.Tick(t0.Add(lock))
	checkInvariants(t, p)
	wantStates(t, p, 0, 4, Acquired, "a", 1)
	wantStates(t, p, 5, 9, Available, "", 1)
	if d, ok := p.NextDeadline(); !ok || !d.Equal(t0.Add(20*time.Second+lock)) {
		t.Fatalf("NextDeadline after the first expiry = %v, %v", d.Sub(t0), ok)
	}
	mustAck(t, p, "a", t0.Add(49*time.Second), ack(0, 4, Accept))
	wantWindow(t, p, 5, 10)
}

func TestAcknowledgeInvalid(t *testing.T) {
	tests := []struct {
		name string
		acks []AckBatch
		want error
	}{
		{"reversed range", []AckBatch{ack(5, 4, Accept)}, ErrInvalidRequest},
		{"negative offset", []AckBatch{ack(-1, 4, Accept)}, ErrInvalidRequest},
		{"no types", []AckBatch{ack(0, 4)}, ErrInvalidRequest},
		{"too few types", []AckBatch{ack(0, 2, Accept, Accept)}, ErrInvalidRequest},
		{"too many types", []AckBatch{ack(0, 1, Accept, Accept, Accept)}, ErrInvalidRequest},
		{"unknown type", []AckBatch{ack(0, 1, 5)}, ErrInvalidRequest},
		{"negative type", []AckBatch{ack(0, 1, Accept, -1)}, ErrInvalidRequest},
		{"overlapping batches", []AckBatch{ack(0, 4, Accept), ack(4, 6, Accept)}, ErrInvalidRequest},
		{"descending batches", []AckBatch{ack(5, 6, Accept), ack(0, 1, Accept)}, ErrInvalidRequest},
		{"huge range", []AckBatch{ack(0, math.MaxInt64, Accept, Accept)}, ErrInvalidRequest},
		{"bad batch after a good one not held", []AckBatch{ack(20, 21, Accept), ack(22, 21, Accept)}, ErrInvalidRequest},
		{"never acquired", []AckBatch{ack(10, 12, Accept)}, ErrInvalidRecordState},
		{"partly beyond SPEO", []AckBatch{ack(8, 10, Accept)}, ErrInvalidRecordState},
		{"below SPSO", []AckBatch{ack(0, 0, Accept)}, ErrInvalidRecordState},
		{"held by another member", []AckBatch{ack(3, 3, Accept)}, ErrInvalidRecordState},
		{"released", []AckBatch{ack(4, 4, Accept)}, ErrInvalidRecordState},
		{"already acknowledged", []AckBatch{ack(5, 5, Reject)}, ErrInvalidRecordState},
		{"good batch then a bad one", []AckBatch{ack(6, 7, Accept), ack(8, 8, Accept), ack(9, 9, Accept)}, ErrInvalidRecordState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 0: accepted (below SPSO); 1-2, 6-7 and 9: held by a; 3: held by b;
			// 4: released by b; 5: accepted; 8: released by a.
			p := New(Config{}, 0)
			acquire(t, p, "a", batches(0, 2), 100, t0)
			acquire(t, p, "b", batches(3, 3), 100, t0)
			acquire(t, p, "a", batches(4, 9), 100, t0)
			mustAck(t, p, "a", t0, ack(0, 0, Accept), ack(4, 5, Release, Accept), ack(8, 8, Release))
			acquire(t, p, "b", batches(4, 4, 5, 7, 8, 9), 1, t0.Add(time.Second))
			mustAck(t, p, "b", t0, ack(4, 4, Release))
			before, v := p.dump(), p.Version()
			err := p.Acknowledge("a", tt.acks, t0.Add(2*time.Second))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v\n%s", err, tt.want, before)
			}
			checkInvariants(t, p)
			if after := p.dump(); after != before || p.Version() != v {
				t.Fatalf("a failed acknowledgement changed the partition:\n%s\nto\n%s", before, after)
			}
		})
	}
}

func TestAcknowledgeAfterTimeout(t *testing.T) {
	p := New(Config{}, 0)
	acquire(t, p, "a", batches(0, 9), 100, t0)
	// The lock expired at its deadline even without a Tick.
	err := p.Acknowledge("a", []AckBatch{ack(0, 9, Accept)}, t0.Add(lock))
	if !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("err = %v, want ErrInvalidRecordState", err)
	}
	checkInvariants(t, p)
	wantStates(t, p, 0, 9, Available, "", 1)
	// Redelivered to b: a's acknowledgements are still refused.
	wantRanges(t, "redelivery", acquire(t, p, "b", batches(0, 9), 100, t0.Add(lock)), Range{0, 9, 2})
	if err := p.Acknowledge("a", []AckBatch{ack(0, 0, Accept)}, t0.Add(lock)); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("err = %v, want ErrInvalidRecordState", err)
	}
	mustAck(t, p, "b", t0.Add(lock), ack(0, 9, Accept))
	wantWindow(t, p, 10, 10)
}

func TestTickAtDeadline(t *testing.T) {
	p := New(Config{}, 0)
	acquire(t, p, "a", batches(0, 4), 100, t0)
	acquire(t, p, "b", batches(5, 9), 100, t0.Add(time.Second))
	if d, ok := p.NextDeadline(); !ok || !d.Equal(t0.Add(lock)) {
		t.Fatalf("NextDeadline = %v, %v", d, ok)
	}
	p.Tick(t0.Add(lock - time.Nanosecond))
	checkInvariants(t, p)
	wantStates(t, p, 0, 4, Acquired, "a", 1)
	p.Tick(t0.Add(lock))
	checkInvariants(t, p)
	wantStates(t, p, 0, 4, Available, "", 1)
	wantStates(t, p, 5, 9, Acquired, "b", 1)
	if d, ok := p.NextDeadline(); !ok || !d.Equal(t0.Add(lock+time.Second)) {
		t.Fatalf("NextDeadline = %v, %v", d, ok)
	}
	p.Tick(t0.Add(time.Hour))
	checkInvariants(t, p)
	wantStates(t, p, 0, 9, Available, "", 1)
	if _, ok := p.NextDeadline(); ok {
		t.Fatal("NextDeadline with nothing acquired")
	}
	if a, v, w := p.Stats(); a != 0 || v != 10 || w != 10 {
		t.Fatalf("Stats = %d %d %d", a, v, w)
	}
}

func TestClockNeverGoesBack(t *testing.T) {
	p := New(Config{}, 0)
	p.Tick(t0.Add(time.Minute))
	// An acquisition stamped earlier locks from the latest time seen.
	acquire(t, p, "a", batches(0, 4), 100, t0)
	if d, _ := p.NextDeadline(); !d.Equal(t0.Add(time.Minute + lock)) {
		t.Fatalf("deadline %v", d.Sub(t0))
	}
}

func TestReleaseMember(t *testing.T) {
	p := New(Config{DeliveryLimit: 2}, 0)
	acquire(t, p, "a", batches(0, 4), 100, t0)
	acquire(t, p, "b", batches(5, 9), 100, t0)
	mustAck(t, p, "a", t0, ack(2, 2, Release))
	acquire(t, p, "a", batches(2, 2), 100, t0) // count 2: at the limit
	v := p.Version()
	p.ReleaseMember("a", t0)
	checkInvariants(t, p)
	wantStates(t, p, 0, 1, Available, "", 1)
	wantStates(t, p, 2, 2, Archived, "", 2)
	wantStates(t, p, 3, 4, Available, "", 1)
	wantStates(t, p, 5, 9, Acquired, "b", 1)
	wantRanges(t, "archived at limit", p.TakeArchivedAtLimit(), Range{2, 2, 2})
	if p.Version() != v+1 {
		t.Fatalf("version %d, want %d", p.Version(), v+1)
	}
	v = p.Version()
	p.ReleaseMember("b", t0)
	checkInvariants(t, p)
	wantStates(t, p, 5, 9, Available, "", 1)
	if p.Version() != v {
		t.Fatal("releasing to Available moved the version")
	}
	p.ReleaseMember("nobody", t0)
	checkInvariants(t, p)
	if p.runCount() != 3 {
		t.Fatalf("%d runs\n%s", p.runCount(), p.dump())
	}
}

func TestDeliveryLimit(t *testing.T) {
	tests := []struct {
		name    string
		release func(p *Partition, now time.Time)
	}{
		{"release", func(p *Partition, now time.Time) {
			if err := p.Acknowledge("a", []AckBatch{ack(0, 9, Release)}, now); err != nil {
				panic(err)
			}
		}},
		{"lock timeout", func(p *Partition, now time.Time) { p.Tick(now.Add(lock)) }},
		{"member left", func(p *Partition, now time.Time) { p.ReleaseMember("a", now) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(Config{DeliveryLimit: 3}, 0)
			now := t0
			for i := int16(1); i <= 3; i++ {
				wantRanges(t, "acquired", acquire(t, p, "a", batches(0, 9, 10, 14), 10, now), Range{0, 9, i})
				if got := p.TakeArchivedAtLimit(); got != nil {
					t.Fatalf("archived at limit before it: %v", got)
				}
				tt.release(p, now)
				checkInvariants(t, p)
				now = now.Add(time.Hour)
			}
			wantWindow(t, p, 10, 10)
			wantRanges(t, "archived at limit", p.TakeArchivedAtLimit(), Range{0, 9, 3})
			if got := p.TakeArchivedAtLimit(); got != nil {
				t.Fatalf("reported twice: %v", got)
			}
		})
	}
}

func TestRejectedNotReported(t *testing.T) {
	p := New(Config{DeliveryLimit: 1}, 0)
	acquire(t, p, "a", batches(0, 9), 100, t0)
	mustAck(t, p, "a", t0, ack(0, 9, Reject, Reject, Gap, Accept, Reject, Reject, Reject, Reject, Reject, Release))
	wantWindow(t, p, 10, 10)
	wantRanges(t, "archived at limit", p.TakeArchivedAtLimit(), Range{9, 9, 1})
}

func TestStartAdvances(t *testing.T) {
	p := New(Config{}, 0)
	acquire(t, p, "a", batches(0, 9), 100, t0)
	mustAck(t, p, "a", t0, ack(5, 7, Accept))
	wantWindow(t, p, 0, 10)
	mustAck(t, p, "a", t0, ack(1, 3, Reject))
	wantWindow(t, p, 0, 10)
	mustAck(t, p, "a", t0, ack(0, 0, Accept))
	wantWindow(t, p, 4, 10)
	mustAck(t, p, "a", t0, ack(4, 4, Release))
	wantWindow(t, p, 4, 10)
	mustAck(t, p, "a", t0, ack(8, 9, Gap))
	wantWindow(t, p, 4, 10)
	wantRanges(t, "redelivery", acquire(t, p, "a", batches(4, 9, 10, 10), 2, t0), Range{4, 4, 2}, Range{10, 10, 1})
	mustAck(t, p, "a", t0, ack(4, 4, Accept), ack(10, 10, Accept))
	wantWindow(t, p, 11, 11)
	if p.runCount() != 0 {
		t.Fatalf("%d runs in an empty window", p.runCount())
	}
}

func TestAdvanceStart(t *testing.T) {
	tests := []struct {
		name       string
		logStart   int64
		start, end int64
		acquired   int64
		moved      bool
	}{
		{"below SPSO", 2, 3, 20, 14, false},
		{"at SPSO", 3, 3, 20, 14, false},
		{"inside the window", 7, 7, 20, 10, true},
		{"over done offsets", 12, 15, 20, 5, true},
		{"at SPEO", 20, 20, 20, 0, true},
		{"beyond SPEO", 30, 30, 30, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 3-11 and 15-19 acquired, 12-14 accepted.
			p := New(Config{}, 3)
			acquire(t, p, "a", batches(3, 19), 100, t0)
			mustAck(t, p, "a", t0, ack(12, 14, Accept))
			v := p.Version()
			p.AdvanceStart(tt.logStart)
			checkInvariants(t, p)
			wantWindow(t, p, tt.start, tt.end)
			if a, _, _ := p.Stats(); a != tt.acquired {
				t.Fatalf("%d acquired, want %d", a, tt.acquired)
			}
			if moved := p.Version() != v; moved != tt.moved {
				t.Fatalf("version moved %v, want %v", moved, tt.moved)
			}
			if tt.logStart > 3 {
				err := p.Acknowledge("a", []AckBatch{ack(3, 3, Accept)}, t0)
				if !errors.Is(err, ErrInvalidRecordState) {
					t.Fatalf("ack of a truncated offset: %v", err)
				}
			}
			if off, _ := p.FetchOffset(); off != tt.end {
				t.Fatalf("FetchOffset = %d, want %d", off, tt.end)
			}
		})
	}
}

func TestReset(t *testing.T) {
	p := New(Config{DeliveryLimit: 1}, 0)
	acquire(t, p, "a", batches(0, 9), 100, t0)
	mustAck(t, p, "a", t0, ack(5, 5, Release))
	v := p.Version()
	p.Reset(100)
	checkInvariants(t, p)
	wantWindow(t, p, 100, 100)
	if a, av, w := p.Stats(); a != 0 || av != 0 || w != 0 {
		t.Fatalf("Stats = %d %d %d", a, av, w)
	}
	if p.Version() != v+1 {
		t.Fatal("reset did not move the version")
	}
	wantRanges(t, "archived at limit kept", p.TakeArchivedAtLimit(), Range{5, 5, 1})
	p.Reset(100)
	if p.Version() != v+1 {
		t.Fatal("a reset to the same empty window moved the version")
	}
	p.Reset(-1)
	checkInvariants(t, p)
	wantWindow(t, p, 0, 0)
	wantRanges(t, "after reset", acquire(t, p, "a", batches(0, 1), 100, t0), Range{0, 1, 1})
}

func TestSnapshotRestore(t *testing.T) {
	p := New(Config{}, 10)
	acquire(t, p, "a", batches(10, 19), 100, t0)
	mustAck(t, p, "a", t0, ack(12, 13, Accept), ack(15, 15, Reject), ack(16, 17, Release))
	acquire(t, p, "b", batches(16, 17, 18, 19, 20, 24), 100, t0) // 16-17 at count 2, 20-24 new
	mustAck(t, p, "b", t0, ack(21, 21, Release))
	s := p.Snapshot()
	want := Snapshot{StartOffset: 10, Batches: []StateBatch{
		{10, 11, Available, 1}, // acquired by a: persisted as available
		{12, 13, Acknowledged, 1},
		{14, 14, Available, 1},
		{15, 15, Archived, 1},
		{16, 17, Available, 2},
		{18, 24, Available, 1}, // 18-19 held by a, 20-24 by b: merged
	}}
	if s.StartOffset != want.StartOffset || !slices.Equal(s.Batches, want.Batches) {
		t.Fatalf("snapshot %+v\nwant %+v", s, want)
	}
	q, err := Restore(Config{}, s)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, q)
	wantWindow(t, q, 10, 25)
	if q.Version() != 0 {
		t.Fatalf("restored version %d", q.Version())
	}
	if a, av, w := q.Stats(); a != 0 || av != 12 || w != 15 {
		t.Fatalf("restored Stats = %d %d %d", a, av, w)
	}
	if s2 := q.Snapshot(); s2.StartOffset != s.StartOffset || !slices.Equal(s2.Batches, s.Batches) {
		t.Fatalf("snapshot of the restored %+v\nwant %+v", s2, s)
	}
	// A new leader redelivers, counts going on from the persisted ones.
	wantRanges(t, "redelivery", acquire(t, q, "c", batches(10, 19, 20, 24), 100, t0),
		Range{10, 11, 2}, Range{14, 14, 2}, Range{16, 17, 3}, Range{18, 24, 2})

	// Empty window.
	e, err := Restore(Config{}, New(Config{}, 7).Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, e)
	wantWindow(t, e, 7, 7)
}

func TestRestoreNormalizes(t *testing.T) {
	p, err := Restore(Config{DeliveryLimit: 3}, Snapshot{StartOffset: 5, Batches: []StateBatch{
		{5, 6, Acknowledged, 1},
		{7, 7, Archived, 0},
		{9, 10, Available, 3}, // reached the limit: archived
		{11, 12, Available, 1},
		{13, 13, Available, 1}, // merged with the one before
		{15, 15, Acknowledged, 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, p)
	wantWindow(t, p, 8, 16)
	wantStates(t, p, 8, 8, Available, "", 0) // the gap
	wantStates(t, p, 9, 10, Archived, "", 3)
	wantStates(t, p, 11, 13, Available, "", 1)
	wantStates(t, p, 14, 14, Available, "", 0)
	if p.Version() != 1 {
		t.Fatalf("version %d, want 1", p.Version())
	}
	wantRanges(t, "archived at limit", p.TakeArchivedAtLimit(), Range{9, 10, 3})
}

func TestRestoreInvalid(t *testing.T) {
	tests := []struct {
		name string
		s    Snapshot
	}{
		{"negative start", Snapshot{StartOffset: -1}},
		{"reversed batch", Snapshot{Batches: []StateBatch{{5, 4, Available, 1}}}},
		{"below start", Snapshot{StartOffset: 10, Batches: []StateBatch{{9, 12, Available, 1}}}},
		{"overlapping", Snapshot{Batches: []StateBatch{{0, 4, Available, 1}, {4, 5, Available, 1}}}},
		{"descending", Snapshot{Batches: []StateBatch{{6, 7, Available, 1}, {0, 1, Available, 1}}}},
		{"beyond max in flight", Snapshot{StartOffset: 100, Batches: []StateBatch{{100, 100 + 20000, Available, 1}}}},
		{"acquired", Snapshot{Batches: []StateBatch{{0, 1, Acquired, 1}}}},
		{"unknown state", Snapshot{Batches: []StateBatch{{0, 1, 3, 1}}}},
		{"negative count", Snapshot{Batches: []StateBatch{{0, 1, Available, -1}}}},
		{"last offset", Snapshot{Batches: []StateBatch{{math.MaxInt64 - 1, math.MaxInt64, Archived, 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Restore(Config{}, tt.s)
			if !errors.Is(err, ErrInvalidSnapshot) || p != nil {
				t.Fatalf("Restore = %v, %v; want ErrInvalidSnapshot", p, err)
			}
		})
	}
	if _, err := Restore(Config{MaxInFlight: math.MaxInt64}, Snapshot{Batches: []StateBatch{{math.MaxInt64 - 1, math.MaxInt64, Archived, 1}}}); err == nil {
		t.Fatal("restored a window ending at the last offset")
	}
}

func TestVersion(t *testing.T) {
	p := New(Config{DeliveryLimit: 3}, 0)
	steps := []struct {
		name  string
		do    func()
		moves bool
	}{
		{"acquire new", func() { p.Acquire("a", 0, batches(0, 9), 100, true, t0) }, true},
		{"acquire nothing", func() { p.Acquire("b", 10, nil, 100, true, t0) }, false},
		{"renew", func() { _ = p.Acknowledge("a", []AckBatch{ack(0, 9, Renew)}, t0) }, false},
		{"failed ack", func() { _ = p.Acknowledge("b", []AckBatch{ack(0, 9, Accept)}, t0) }, false},
		{"release to available", func() { _ = p.Acknowledge("a", []AckBatch{ack(5, 9, Release)}, t0) }, false},
		{"acquire in flight: count changes", func() { p.Acquire("b", 5, batches(5, 9), 100, true, t0) }, true},
		{"accept not at SPSO", func() { _ = p.Acknowledge("a", []AckBatch{ack(3, 3, Accept)}, t0) }, true},
		{"accept at SPSO", func() { _ = p.Acknowledge("a", []AckBatch{ack(0, 0, Accept)}, t0) }, true},
		{"timeout to available", func() { p.Tick(t0.Add(lock)) }, false},
		{"member left, nothing held", func() { p.ReleaseMember("a", t0.Add(lock)) }, false},
		{"acquire again: counts 2 and 3", func() { p.Acquire("c", 1, batches(0, 9), 100, true, t0.Add(lock)) }, true},
		{"timeout at the limit", func() { p.Tick(t0.Add(2 * lock)) }, true},
		{"tick with nothing due", func() { p.Tick(t0.Add(3 * lock)) }, false},
		{"advance start", func() { p.AdvanceStart(20) }, true},
		{"reset to the same", func() { p.Reset(20) }, false},
		{"skip only", func() { p.Acquire("a", 20, []Batch{{20, 20, true}}, 100, true, t0) }, true},
	}
	for _, s := range steps {
		v := p.Version()
		s.do()
		checkInvariants(t, p)
		if moved := p.Version() != v; moved != s.moves {
			t.Fatalf("%s: version moved %v, want %v\n%s", s.name, moved, s.moves, p.dump())
		}
		if d := p.Version() - v; d > 1 {
			t.Fatalf("%s: version moved by %d", s.name, d)
		}
	}
}
