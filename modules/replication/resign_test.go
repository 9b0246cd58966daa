package replication

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// A leader whose log went offline resigns to another ISR member; when it is the ISR's
// only member it hands the partition to another replica only if the topic allows
// unclean elections, and otherwise stays offline with one Error line.
func TestResignOfflineLeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		isr     []int32
		unclean string
		wantISR []int32 // nil: no resignation
		wantLog string
	}{
		{name: "clean", isr: []int32{1, 3}, unclean: "false", wantISR: []int32{3}, wantLog: "unclean=false"},
		{name: "unclean", isr: []int32{1}, unclean: "true", wantISR: []int32{2}, wantLog: "unclean=true"},
		{name: "no unclean", isr: []int32{1}, unclean: "false", wantLog: "the partition stays offline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			var logs bytes.Buffer
			im := image(2, topicSpec{name: "t", id: 1, configs: map[string]string{"unclean.leader.election.enable": tc.unclean}})
			pi := &im.Topic("t").Partitions[0]
			pi.Replicas, pi.ISR = []int32{1, 2, 3}, tc.isr
			h.meta.publish(im)
			p := h.m.partition(kernel.TopicPartition{Topic: "t"})
			if p == nil || !p.IsLeader() {
				t.Fatal("node 1 does not lead t-0")
			}
			env := *p.env
			env.alter, env.log = true, slog.New(slog.NewTextHandler(&logs, nil))
			p.mu.Lock() // the module's ISR checks read env under mu
			p.env = &env
			p.mu.Unlock()
			p.offline.Store(true)
			req := p.resign(h.m.now().UnixMilli())
			switch {
			case tc.wantISR == nil && req != nil:
				t.Fatalf("resigned with %+v; want to stay offline", *req)
			case tc.wantISR != nil && (req == nil || !req.Resign || !slices.Equal(req.ISR, tc.wantISR)):
				t.Fatalf("resignation %+v, want ISR %v", req, tc.wantISR)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Fatalf("log does not say %q:\n%s", tc.wantLog, logs.String())
			}
			// Asked again (the next failed call), it neither proposes twice nor logs twice.
			if again := p.resign(h.m.now().UnixMilli()); again != nil {
				t.Fatalf("a second resignation while one is in flight or refused: %+v", *again)
			}
			if n := strings.Count(logs.String(), "level="); n != 1 {
				t.Fatalf("%d log lines for two tries, want 1:\n%s", n, logs.String())
			}
		})
	}
}
