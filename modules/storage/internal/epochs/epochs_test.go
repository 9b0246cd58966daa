package epochs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

func ee(pairs ...int64) []kernel.EpochEntry {
	var out []kernel.EpochEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, kernel.EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

func cacheOf(es []kernel.EpochEntry) *Cache {
	var c Cache
	c.Load(es)
	return &c
}

func same(a, b []kernel.EpochEntry) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestAssign(t *testing.T) {
	tests := []struct {
		name      string
		have      []kernel.EpochEntry
		epoch     int32
		start     int64
		wantAdded bool
		wantErr   bool
		want      []kernel.EpochEntry
	}{
		{"first entry", nil, 0, 0, true, false, ee(0, 0)},
		{"first entry at a later offset", nil, 4, 100, true, false, ee(4, 100)},
		{"newer epoch later", ee(1, 0), 3, 10, true, false, ee(1, 0, 3, 10)},
		{"newer epoch at the same start", ee(1, 10), 2, 10, true, false, ee(1, 10, 2, 10)},
		{"same epoch ignored", ee(1, 0), 1, 10, false, false, ee(1, 0)},
		{"older epoch ignored", ee(5, 0), 2, 10, false, false, ee(5, 0)},
		{"older epoch ignored even below the start", ee(5, 20), 2, 10, false, false, ee(5, 20)},
		{"negative epoch ignored", nil, -1, 0, false, false, nil},
		{"newer epoch below the latest start", ee(1, 20), 2, 10, false, true, ee(1, 20)},
		{"negative start", nil, 1, -1, false, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cacheOf(tc.have)
			added, err := c.Assign(tc.epoch, tc.start)
			if added != tc.wantAdded || (err != nil) != tc.wantErr {
				t.Fatalf("Assign(%d, %d) = %v, %v; want %v, error %v", tc.epoch, tc.start, added, err, tc.wantAdded, tc.wantErr)
			}
			if err != nil && !errors.Is(err, kernel.ErrInvalidOffset) {
				t.Fatalf("error %v is not ErrInvalidOffset", err)
			}
			if !same(c.Entries(), tc.want) {
				t.Fatalf("entries %v, want %v", c.Entries(), tc.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	base := ee(1, 0, 3, 10, 4, 10, 6, 30)
	tests := []struct {
		name        string
		fromEnd     bool
		at          int64
		wantChanged bool
		want        []kernel.EpochEntry
	}{
		{"end past all", true, 31, false, base},
		{"end at the last start", true, 30, true, ee(1, 0, 3, 10, 4, 10)},
		{"end inside an epoch", true, 25, true, ee(1, 0, 3, 10, 4, 10)},
		{"end at a shared start", true, 10, true, ee(1, 0)},
		{"end at zero", true, 0, true, nil},
		{"start at zero", false, 0, false, base},
		{"start inside the first", false, 5, true, ee(1, 5, 3, 10, 4, 10, 6, 30)},
		{"start at a shared start", false, 10, true, ee(4, 10, 6, 30)},
		{"start inside a later epoch", false, 12, true, ee(4, 12, 6, 30)},
		{"start at the last start", false, 30, true, ee(6, 30)},
		{"start past everything", false, 100, true, ee(6, 100)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cacheOf(base)
			var changed bool
			if tc.fromEnd {
				changed = c.TruncateFromEnd(tc.at)
			} else {
				changed = c.TruncateFromStart(tc.at)
			}
			if changed != tc.wantChanged || !same(c.Entries(), tc.want) {
				t.Fatalf("got %v (changed %v), want %v (changed %v)", c.Entries(), changed, tc.want, tc.wantChanged)
			}
			checkInvariants(t, c.Entries())
		})
	}
	var c Cache
	if c.TruncateFromStart(5) || c.TruncateFromEnd(0) || c.Clear() {
		t.Fatal("an empty cache changed")
	}
	c.Load(base)
	if !c.Clear() || c.Len() != 0 || c.LatestEpoch() != -1 {
		t.Fatalf("after Clear: %v", c.Entries())
	}
}

func TestEndOffsetFor(t *testing.T) {
	c := cacheOf(ee(2, 5, 4, 10, 7, 20))
	const leo = 42
	tests := []struct {
		name      string
		requested int32
		epoch     int32
		end       int64
	}{
		{"latest", 7, 7, leo},
		{"below all", 1, 1, 5},
		{"zero below all", 0, 0, 5},
		{"first", 2, 2, 10},
		{"middle", 4, 4, 20},
		{"between first and middle", 3, 2, 10},
		{"between middle and latest", 6, 4, 20},
		{"newer than all", 8, -1, -1},
		{"negative", -1, -1, -1},
		{"very negative", -100, -1, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, off := c.EndOffsetFor(tc.requested, leo)
			if e != tc.epoch || off != tc.end {
				t.Fatalf("EndOffsetFor(%d) = %d, %d; want %d, %d", tc.requested, e, off, tc.epoch, tc.end)
			}
		})
	}
	var empty Cache
	if e, off := empty.EndOffsetFor(0, leo); e != -1 || off != -1 {
		t.Fatalf("empty: %d, %d", e, off)
	}
}

func checkInvariants(t *testing.T, es []kernel.EpochEntry) {
	t.Helper()
	for i, e := range es {
		if e.Epoch < 0 || e.StartOffset < 0 {
			t.Fatalf("negative entry %v in %v", e, es)
		}
		if i > 0 && (e.Epoch <= es[i-1].Epoch || e.StartOffset < es[i-1].StartOffset) {
			t.Fatalf("entries out of order: %v", es)
		}
	}
}

func TestCodec(t *testing.T) {
	es := ee(0, 0, 3, 1200, 5, 1200, 2147483647, 9223372036854775807)
	b := Encode(es)
	if want := "0\n4\n0 0\n3 1200\n5 1200\n2147483647 9223372036854775807\n"; string(b) != want {
		t.Fatalf("Encode = %q, want %q", b, want)
	}
	got, err := Decode(b)
	if err != nil || !same(got, es) {
		t.Fatalf("Decode = %v, %v", got, err)
	}
	if string(Encode(nil)) != "0\n0\n" {
		t.Fatalf("Encode(nil) = %q", Encode(nil))
	}
	for _, ok := range []string{"", "0\n0\n", "0\n0", "0\n1\n3 7", "0\n2\n1\t 5\n2   5\n"} {
		if _, err := Decode([]byte(ok)); err != nil {
			t.Errorf("Decode(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"\n", "0\n", "1\n0\n", "x\n0\n", "0\n-1\n", "0\n1\n", "0\n0\n1 2\n", "0\n2\n1 2\n",
		"0\n1\n1\n", "0\n1\n1 2 3\n", "0\n1\n-1 2\n", "0\n1\n1 -2\n", "0\n1\n2147483648 0\n",
		"0\n1\n1 9223372036854775808\n", "0\n2\n3 5\n3 6\n", "0\n2\n3 5\n2 6\n", "0\n2\n3 5\n4 4\n",
		"0\n1\n1 2\n\n", "0\n1\na b\n",
	} {
		if es, err := Decode([]byte(bad)); err == nil || !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("Decode(%q) = %v, %v; want ErrBadCheckpoint", bad, es, err)
		}
	}
}
