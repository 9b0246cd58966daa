package epochs

import (
	"testing"
)

// FuzzDecode: Decode never panics, accepts only entries that keep the invariants, and
// what it accepts survives an Encode/Decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("0\n"))
	f.Add([]byte("0\n0\n"))
	f.Add(Encode(ee(0, 0)))
	f.Add(Encode(ee(1, 0, 4, 1200)))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := Decode(b)
		if err != nil {
			return
		}
		if len(es) > len(b)/4+1 {
			t.Fatalf("%d entries from %d bytes", len(es), len(b))
		}
		checkInvariants(t, es)
		again, err := Decode(Encode(es))
		if err != nil || !same(again, es) {
			t.Fatalf("round trip: %v, %v; want %v", again, err, es)
		}
		var c Cache
		c.Load(es)
		if !same(c.Entries(), es) {
			t.Fatal("Load changed the entries")
		}
	})
}
