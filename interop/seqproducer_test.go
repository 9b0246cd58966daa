package interop

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// seqRecords is the bookkeeping of the durability tests: numbered records produced
// round-robin to a topic's partitions (record seq of partition p has the value
// value(p, seq), seqs counting from 0 per partition), what was handed to a client and
// what was acknowledged, at which offset. It outlives one client: a test that restarts
// its producer starts another run on the same records, and the numbering goes on.
type seqRecords struct {
	topic string
	value func(p int32, seq int64) []byte

	mu       sync.Mutex
	sent     []int64      // records handed to a client, per partition
	acked    [][]crashAck // acknowledged records, per partition, in acknowledgement order
	nAcked   int
	failed   int
	firstErr error
}

func newSeqRecords(topic string, partitions int, value func(p int32, seq int64) []byte) *seqRecords {
	return &seqRecords{topic: topic, value: value, sent: make([]int64, partitions), acked: make([][]crashAck, partitions)}
}

// seqRun is one client producing seqRecords from its own goroutine.
type seqRun struct {
	cancel   context.CancelFunc
	done     chan struct{}
	inflight sync.WaitGroup
}

// start hands cl the next numbered record of each partition in turn, from a goroutine,
// until halt. Records are produced with produceCtx: a background context keeps buffered
// records retrying across a broker restart; a cancelled one fails them.
func (s *seqRecords) start(cl *kgo.Client, produceCtx context.Context) *seqRun {
	loop, cancel := context.WithCancel(context.Background())
	r := &seqRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for i := 0; loop.Err() == nil; i++ {
			p := int32(i % len(s.sent))
			s.mu.Lock()
			seq := s.sent[p]
			s.sent[p]++
			s.mu.Unlock()
			r.inflight.Add(1)
			cl.Produce(produceCtx, &kgo.Record{Topic: s.topic, Partition: p, Value: s.value(p, seq)},
				func(rec *kgo.Record, err error) {
					defer r.inflight.Done()
					s.mu.Lock()
					defer s.mu.Unlock()
					if err != nil {
						s.failed++
						if s.firstErr == nil {
							s.firstErr = fmt.Errorf("partition %d seq %d: %w", p, seq, err)
						}
						return
					}
					s.acked[p] = append(s.acked[p], crashAck{seq: seq, offset: rec.Offset})
					s.nAcked++
				})
		}
	}()
	return r
}

// halt stops handing out records and waits for the producing goroutine; records
// already handed over are still in flight (flush or close the client, then wait).
// It may be called more than once.
func (r *seqRun) halt() {
	r.cancel()
	<-r.done
}

// wait waits until every record handed over was acknowledged or failed.
func (r *seqRun) wait() { r.inflight.Wait() }

// ackedCount is the number of acknowledged records, all partitions together.
func (s *seqRecords) ackedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nAcked
}

// failures returns how many records failed and the first failure.
func (s *seqRecords) failures() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed, s.firstErr
}

// resetFailures forgets the failures counted so far.
func (s *seqRecords) resetFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed, s.firstErr = 0, nil
}

// snapshot copies what was sent and acknowledged so far, per partition.
func (s *seqRecords) snapshot() (sent []int64, acked [][]crashAck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acked = make([][]crashAck, len(s.acked))
	for p := range s.acked {
		acked[p] = append([]crashAck(nil), s.acked[p]...)
	}
	return append([]int64(nil), s.sent...), acked
}
