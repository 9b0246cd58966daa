package image

import (
	"fmt"
	"testing"
)

// BenchmarkApplyElectionRound: the controller's answer to a dead broker at scale, one
// PartitionChange per partition it led, applied as one batch entry and as one entry
// per record (what the log held before batches). A topic of 65,536 partitions and
// 2 brokers; b.N rounds of n changes. One entry per record copies the topic's
// partitions for each: 4 s a round at 1,000 changes, 41 s at 10,000 (measured once;
// the per-entry form runs only at 1,000).
func BenchmarkApplyElectionRound(b *testing.B) {
	const parts = 1 << 16
	for _, n := range []int{1000, 10000} {
		s := EmptyState()
		var err error
		assigns := make([]PartitionAssignment, parts)
		for i := range assigns {
			assigns[i] = PartitionAssignment{Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1, 2}}
		}
		for i, rec := range []Record{
			&RegisterBrokerRecord{NodeID: 1, Incarnation: id(3), Endpoints: []Endpoint{{"PLAINTEXT", "h1", 9092}}},
			&RegisterBrokerRecord{NodeID: 2, Incarnation: id(4), Endpoints: []Endpoint{{"PLAINTEXT", "h2", 9092}}},
			&CreateTopicRecord{Name: "big", ID: id(10), Partitions: assigns},
		} {
			if s, err = s.Apply(uint64(i+1), rec); err != nil {
				b.Fatal(err)
			}
		}
		recs := make([]Record, n)
		for i := range recs {
			recs[i] = &PartitionChangeRecord{Topic: "big", ID: id(10), Partition: int32(i), PartitionEpoch: -1, Leader: i32(2), ISR: []int32{2}}
		}
		b.Run(fmt.Sprintf("changes=%d/batch", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				next, _ := s.applyBatch(10, &BatchRecord{Records: recs})
				if next.Image.Topic("big").Partitions[n-1].Leader != 2 {
					b.Fatal("not applied")
				}
			}
		})
		if n > 1000 {
			continue
		}
		b.Run(fmt.Sprintf("changes=%d/entries", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				cur := s
				for j, r := range recs {
					cur, _ = cur.Apply(uint64(10+j), r)
				}
			}
		})
	}
}
