package wasm

import (
	"context"
	"strings"
	"testing"
)

var alice = Source{PrincipalType: "User", PrincipalName: "alice", ClientID: "app-1"}

// headerMap returns an output record's headers by key.
func headerMap(o Output) map[string]string {
	m := map[string]string{}
	for _, h := range o.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

func withSource(b *Batch, s Source) *Batch {
	b.Source = s
	return b
}

// TestSluiceBatchSource drives batch_source through a guest that reports what it
// returns: the fields, -len for a buffer too small, the length for one that fits,
// errno -4 before the first batch and after fail, -2 for a field that does not fit
// its u16 length, and a trap for a buffer out of bounds.
func TestSluiceBatchSource(t *testing.T) {
	p := newPool(t, "source", Config{Instances: 1})
	check := func(out []Output, want map[string]string) {
		t.Helper()
		if len(out) == 0 {
			t.Fatal("no output")
		}
		for _, o := range out {
			got := headerMap(o)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		}
	}
	// 6 + len("User") + len("alice") + len("app-1") = 20.
	check(mustTransform(t, p, withSource(values("a", "b"), alice)), map[string]string{
		"type": "User", "name": "alice", "client": "app-1", "rc.zero": "-20", "rc.ok": "20", "rc.outside": "-4",
	})
	_, err := p.Transform(context.Background(), withSource(values("fail"), alice))
	wantKind(t, err, KindFailed)
	// The zero source (derived mode): three empty fields. rc.outside is the call
	// made after fail.
	check(mustTransform(t, p, values("c")), map[string]string{
		"type": "", "name": "", "client": "", "rc.zero": "-6", "rc.ok": "6", "rc.outside": "-4",
	})
	anon := Source{PrincipalType: "User", PrincipalName: "ANONYMOUS", ClientID: strings.Repeat("c", 32767)}
	check(mustTransform(t, p, withSource(values("d"), anon)), map[string]string{
		"name": "ANONYMOUS", "client": anon.ClientID, "rc.ok": "32786",
	})
	huge := Source{PrincipalType: "User", PrincipalName: strings.Repeat("n", 1<<16)}
	check(mustTransform(t, p, withSource(values("e"), huge)), map[string]string{
		"name": "", "rc.zero": "-2", "rc.ok": "-2",
	})
	_, err = p.Transform(context.Background(), withSource(values("oob"), alice))
	if e := wantKind(t, err, KindTrap); !strings.Contains(e.Msg, "batch_source") {
		t.Errorf("trap message %q does not name batch_source", e.Msg)
	}
	// The next batch gets a fresh instance.
	check(mustTransform(t, p, withSource(values("f"), alice)), map[string]string{"name": "alice", "rc.outside": "-4"})
}

// TestOldGuestsIgnoreSource: modules that do not import batch_source (built before
// it, or with an SDK that never calls Source) deploy and run as before, whatever
// the batch's source.
func TestOldGuestsIgnoreSource(t *testing.T) {
	for _, g := range []string{"identity", "sdkidentity"} {
		t.Run(g, func(t *testing.T) {
			prog := program(t, g, 0)
			for _, f := range prog.compiled.ImportedFunctions() {
				if mod, name, _ := f.Import(); mod == string(ABISluiceV1) && name == "batch_source" {
					t.Fatalf("%s imports batch_source", g)
				}
			}
			p := newPool(t, g, Config{Instances: 1})
			out := mustTransform(t, p, withSource(values("x", "y"), alice))
			if got := strings.Join(outValues(out), ","); got != "x,y" {
				t.Fatalf("values %q", got)
			}
			for _, o := range out {
				if len(o.Headers) != 0 {
					t.Fatalf("headers %v", o.Headers)
				}
			}
		})
	}
}

// TestRedpandaBatchMetadata: Redpanda's ABI v3 read_batch_metadata answers the
// principal name, type and client id (keys 1-3), 0 for keys we do not have or do
// not know and for empty values, -3 for a buffer too small and -1 outside a batch.
func TestRedpandaBatchMetadata(t *testing.T) {
	p := newPool(t, "rpsource", Config{Instances: 1})
	for _, tc := range []struct {
		name string
		src  Source
		want string
	}{
		{"alice", alice, "k0=0;k1='alice';k2='User';k3='app-1';k4=0;k5=0;k6=0;k7=0;short=-3;outside=-1"},
		{"no client id", Source{PrincipalType: "User", PrincipalName: "ANONYMOUS"}, "k0=0;k1='ANONYMOUS';k2='User';k3=0;k4=0;k5=0;k6=0;k7=0;short=-3;outside=-1"},
		{"derived", Source{}, "k0=0;k1=0;k2=0;k3=0;k4=0;k5=0;k6=0;k7=0;short=0;outside=-1"},
	} {
		out := mustTransform(t, p, withSource(values("a", "b"), tc.src))
		if len(out) != 2 {
			t.Fatalf("%s: %d records", tc.name, len(out))
		}
		for _, o := range out {
			if string(o.Value) != tc.want {
				t.Errorf("%s: %s\nwant %s", tc.name, o.Value, tc.want)
			}
		}
	}
}
