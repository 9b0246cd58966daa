package auth

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// TestCredStateHammer: lookups (lock-free) race with rebuilds from the subscription and
// from readers catching up with a newer image; under -race this checks the index is
// published safely, and every reader sees a whole index: alice's stored SCRAM-SHA-512
// credential and her bootstrap SCRAM-SHA-256 one, at some version.
func TestCredStateHammer(t *testing.T) {
	cr, err := deriveCredential(mechSHA512, "stored", []byte("salt"), MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	ns := map[string][]byte{credKey(mechSHA512, "alice"): encodeCredential(cr)}
	var latest atomic.Pointer[kernel.Image]
	latest.Store(&kernel.Image{Version: 1, Extensions: map[string]map[string][]byte{CredentialNamespace: ns}})
	c := new(credState)
	if err := c.init(slog.New(slog.NewTextHandler(io.Discard, nil)), []UserConfig{aliceUser}, latest.Load, nil); err != nil {
		t.Fatal(err)
	}
	const readers, loops = 4, 2000
	var wg sync.WaitGroup
	wg.Go(func() {
		for v := uint64(2); v < loops; v++ {
			// Every other image copies the namespace map (a change), the others share it.
			n := ns
			if v%2 == 0 {
				n = map[string][]byte{credKey(mechSHA512, "alice"): ns[credKey(mechSHA512, "alice")]}
			}
			im := &kernel.Image{Version: v, Extensions: map[string]map[string][]byte{CredentialNamespace: n}}
			latest.Store(im)
			c.apply(im)
		}
	})
	for range readers {
		wg.Go(func() {
			var last uint64
			for range loops {
				idx := c.current()
				if idx.version < last {
					t.Errorf("index version went back from %d to %d", last, idx.version)
					return
				}
				last = idx.version
				if s := idx.creds[userMech{"alice", mechSHA512}]; s == nil || s.bootstrap {
					t.Errorf("version %d: no stored SCRAM-SHA-512 credential", idx.version)
					return
				}
				if b := c.lookup(mechSHA256, "alice"); b == nil || !b.bootstrap {
					t.Errorf("no bootstrap SCRAM-SHA-256 credential")
					return
				}
			}
		})
	}
	wg.Wait()
}
