package groups

import (
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// A refresh asks each partition's offsets in rounds of one offset per partition,
// smallest first, at most maxTimestampRounds.
func TestRemoteWantRounds(t *testing.T) {
	a, b := kernel.TopicPartition{Topic: "t", Partition: 0}, kernel.TopicPartition{Topic: "t", Partition: 1}
	var w remoteWant
	for _, off := range []int64{9, 3, 3, 5} {
		w.behind(a, off)
	}
	w.behind(b, 7)
	for i := range int64(maxTimestampRounds + 4) {
		w.behind(kernel.TopicPartition{Topic: "many"}, 100+i)
	}
	rs := w.rounds()
	if len(rs) != maxTimestampRounds {
		t.Fatalf("%d rounds, want %d", len(rs), maxTimestampRounds)
	}
	if rs[0][a] != 3 || rs[1][a] != 5 || rs[2][a] != 9 || rs[0][b] != 7 {
		t.Fatalf("rounds %v", rs)
	}
	if _, ok := rs[3][a]; ok {
		t.Fatalf("partition a in round 3: %v", rs[3])
	}
	if got := rs[maxTimestampRounds-1][kernel.TopicPartition{Topic: "many"}]; got != 100+maxTimestampRounds-1 {
		t.Fatalf("the last round asks %d", got)
	}
}
