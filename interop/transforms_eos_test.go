package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransformDerivedExactlyOnce deploys route-by-key as a derived transform through
// the CLI (exactly once: the broker has the txn and groups modules), produces numbered
// records with kgo in rounds (a first chunk, which the transform commits, then the
// rest), SIGKILLing the broker right after each round (while the transform is working
// through it) and starting it again, and checks with a
// read_committed consumer that every input record's output is in its route's output
// exactly once: no loss, no duplicate. The transform's position, the offsets of the
// group __sluice-transform-router, reaches the input's end.
func TestTransformDerivedExactlyOnce(t *testing.T) {
	wasm := exampleWasm(t, "route-by-key")
	b := startBroker(t)
	const in, low, high = "eos-in", "eos-a-m", "eos-n-z"
	createTopic(t, b.addr, in, 2)
	createTopic(t, b.addr, low, 1)
	createTopic(t, b.addr, high, 2)
	mustCLI(t, b.adminAddr, "deploy", "--name", "router", "--input", in, "--output", low, "--output", high, "--mode", "derived", wasm)

	var raw []map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, b.adminAddr, "list", "--json")), &raw); err != nil || len(raw) != 1 || raw[0]["exactly_once"] != true {
		t.Fatalf("list --json: want one transform with exactly_once true; got %v (err %v)", raw, err)
	}

	const group = "__sluice-transform-router"
	adm := kadm.NewClient(newClient(t, b.addr))
	// caughtUp reports whether the position reached the input's end (no transaction
	// in the input: its high watermark), or why not.
	caughtUp := func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, in)
		if err != nil {
			return false, err.Error()
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		for p, e := range ends[in] {
			if o, ok := offs.Lookup(in, p); !ok || o.At != e.Offset {
				return false, fmt.Sprintf("%s/%d: group at %d (found %v), end %d", in, p, o.At, ok, e.Offset)
			}
		}
		return true, ""
	}
	var last string
	waitCaughtUp := func(what string) {
		t.Helper()
		if !pollUntil(90*time.Second, func() (ok bool) { ok, last = caughtUp(); return ok }) {
			t.Fatalf("%s: the group %s did not reach the input's end: %s", what, group, last)
		}
	}

	// Each round: a first chunk, which the transform commits (so the session after
	// the last restart is working), then the rest, and a SIGKILL right away, while
	// the transform works through it.
	const rounds, perRound, firstChunk = 4, 1500, 300
	want := map[string]string{} // value -> output topic
	for round := range rounds {
		cl := newClient(t, b.addr, kgo.DefaultProduceTopic(in), kgo.ProducerLinger(5*time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		var recs []*kgo.Record
		for i := range perRound {
			n := round*perRound + i
			key, topic := "apple", low
			if n%3 == 0 {
				key, topic = "zebra", high
			}
			v := fmt.Sprintf("rec-%06d", n)
			want[v] = topic
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("%s-%d", key, n)), Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, recs[:firstChunk]...).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		waitCaughtUp(fmt.Sprintf("round %d, first chunk", round))
		err := cl.ProduceSync(ctx, recs[firstChunk:]...).FirstErr()
		cancel()
		cl.Close()
		if err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		if round < rounds-1 {
			b.kill()
			b.start()
			logPosition(t, b.addr, group, in, round)
		}
	}
	waitCaughtUp("the end")

	// Sentinels after everything the transform wrote (it is idle now), then the
	// outputs read with read_committed up to them.
	writeSentinels(t, b.addr, low, 1)
	writeSentinels(t, b.addr, high, 2)
	got := map[string]int{}
	for topic, parts := range map[string]int{low: 1, high: 2} {
		for _, rs := range readToSentinels(t, b.addr, topic, parts, kgo.ReadCommitted(), 60*time.Second) {
			for _, r := range rs {
				v := string(r.Value)
				got[v]++
				if want[v] != topic {
					t.Errorf("%s/%d@%d: %s (key %s) does not belong here (route %q)", topic, r.Partition, r.Offset, v, r.Key, want[v])
				}
			}
		}
	}
	var missing, dup []string
	for v := range want {
		switch n := got[v]; {
		case n == 0:
			missing = append(missing, v)
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s x%d", v, n))
		}
	}
	if len(missing) > 0 || len(dup) > 0 {
		t.Fatalf("of %d input records: %d missing (e.g. %s), %d duplicated (e.g. %s)", len(want),
			len(missing), strings.Join(missing[:min(5, len(missing))], " "), len(dup), strings.Join(dup[:min(5, len(dup))], " "))
	}
	t.Logf("%d input records, each output exactly once across %d SIGKILLs", len(want), rounds-1)
}

// logPosition logs the transform's committed position against the input's end right
// after a restart: a position short of the end shows the SIGKILL hit mid-stream.
func logPosition(t *testing.T, addr, group, topic string, round int) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err1 := adm.ListEndOffsets(ctx, topic)
	offs, err2 := adm.FetchOffsets(ctx, group)
	if err1 != nil || err2 != nil {
		t.Logf("after SIGKILL %d: positions unknown (%v, %v)", round+1, err1, err2)
		return
	}
	var parts []string
	for p, e := range ends[topic] {
		o, _ := offs.Lookup(topic, p)
		parts = append(parts, fmt.Sprintf("%s/%d at %d of %d", topic, p, o.At, e.Offset))
	}
	t.Logf("after SIGKILL %d: %s", round+1, strings.Join(parts, ", "))
}
