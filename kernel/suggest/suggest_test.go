package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"num.partitions", "default.replication.factor", "log.retention.ms", "log.retention.bytes", "storage", "metadata", "replication"}
	for _, tc := range []struct{ in, want string }{
		{"num.partiions", "num.partitions"},       // a deletion
		{"nmu.partitions", "num.partitions"},      // a swap
		{"log.retention.mss", "log.retention.ms"}, // an insertion
		{"default.replication.factr", "default.replication.factor"},
		{"storag", "storage"},
		{"metdata", "metadata"},
		{"zzz", ""},                // nothing near
		{"log.cleaner.enable", ""}, // a real name not in the list
	} {
		if got := Closest(tc.in, known); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if h := Hint("storag", known); h != " (did you mean storage?)" {
		t.Errorf("Hint: %q", h)
	}
	if h := Hint("storage", known); h != "" {
		t.Errorf("Hint of a known name: %q", h)
	}
}

func FuzzDistance(f *testing.F) {
	f.Add("num.partitions", "num.partiions")
	f.Add("", "abc")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := distance(a, b, 1<<30)
		if d != distance(b, a, 1<<30) {
			t.Fatalf("distance(%q, %q) is not symmetric", a, b)
		}
		if (d == 0) != (a == b) {
			t.Fatalf("distance(%q, %q) = %d", a, b, d)
		}
		if d > max(len(a), len(b)) {
			t.Fatalf("distance(%q, %q) = %d, over the longer length", a, b, d)
		}
	})
}
