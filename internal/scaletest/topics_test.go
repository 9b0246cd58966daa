//go:build linux

package scaletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// topicsShape is one run of TestManyTopics.
type topicsShape struct {
	topics int
	maxRSS int64 // asserted bound of the broker's peak RSS
}

func manyTopicsShape() topicsShape {
	if brokerproc.Full() {
		// The goal: 10,000 topics in one request in under 10 s.
		return topicsShape{topics: 10000, maxRSS: 1 << 30}
	}
	return topicsShape{topics: 1000, maxRSS: 384 << 20}
}

// TestManyTopics creates every topic of the shape in one CreateTopics request, waits
// until Metadata lists each with a leader, writes a record to each and reads it back,
// then restarts the broker and lists them again. It asserts every topic was created,
// and the broker's peak RSS stays under the bound; it logs the times
// (docs/BENCHMARKS.md, "Scale and resource safety").
func TestManyTopics(t *testing.T) {
	s := manyTopicsShape()
	p := brokerproc.Start(t, brokerproc.Options{ReadyTimeout: 2 * time.Minute})
	adm := p.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	names := make([]string, s.topics)
	for i := range names {
		names[i] = fmt.Sprintf("many-%05d", i)
	}
	created := createTopics(ctx, t, adm, 1, 1, names)

	// listed waits until Metadata shows every topic with a leader.
	listed := func() time.Duration {
		t.Helper()
		begin := time.Now()
		for {
			md, err := adm.Metadata(ctx, names...)
			if err == nil {
				ok := 0
				for _, td := range md.Topics {
					if td.Err == nil && len(td.Partitions) == 1 && td.Partitions[0].Leader >= 0 && td.Partitions[0].Err == nil {
						ok++
					}
				}
				if ok == s.topics {
					return time.Since(begin)
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("every topic listed with a leader: %v (last error %v)", ctx.Err(), err)
			}
			time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	firstList := listed()

	cl := p.Client(t, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(s.topics*2),
		kgo.RequestTimeoutOverhead(time.Minute), kgo.RecordDeliveryTimeout(5*time.Minute))
	recs := make([]*kgo.Record, len(names))
	for i, name := range names {
		recs[i] = &kgo.Record{Topic: name, Value: []byte(name)}
	}
	written := produceEach(ctx, t, cl, "one record to each topic", recs)
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	for _, name := range names {
		if o, ok := ends.Lookup(name, 0); !ok || o.Err != nil || o.Offset != 1 {
			t.Fatalf("end offset of %s: %+v (found %v), want 1", name, o, ok)
		}
	}
	peak := p.PeakRSS()

	if err := p.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	restartBegin := time.Now()
	p.Restart(t)
	ready := time.Since(restartBegin)
	secondList := listed()
	if after := p.PeakRSS(); after > peak {
		peak = after
	}
	t.Logf("%d topics in one CreateTopics: answered in %v, all listed with leaders %v later, one record each %v; restart to ready %v, all listed %v later; peak RSS %d MiB",
		s.topics, created.Round(time.Millisecond), firstList.Round(time.Millisecond), written.Round(time.Millisecond),
		ready.Round(time.Millisecond), secondList.Round(time.Millisecond), peak>>20)
	if peak > s.maxRSS {
		t.Errorf("broker peak RSS %d MiB, bound %d MiB", peak>>20, s.maxRSS>>20)
	}
}
