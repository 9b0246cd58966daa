package interop

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKcatGroup: `kcat -G` (librdkafka's balanced consumer, auto-commit) with -e reads
// every record of a 4-partition topic, exits at the end of its partitions and commits
// (OffsetFetch shows the end offsets); a second run in the same group reads nothing; after
// more records a third run reads exactly those. (Not `-o beginning`: with it kcat starts
// every assigned partition at the beginning whatever the group committed, so a second run
// rereads everything; auto.offset.reset=earliest only applies where nothing is committed.)
func TestKcatGroup(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	const (
		topic      = "kcat-group"
		group      = "kcat-group-g"
		partitions = 4
	)
	b, adm := startGroupBroker(t, topic, partitions)

	consume := func() []consumedRecord {
		t.Helper()
		start := time.Now()
		out := run(t, 30*time.Second, "", kcat, "-b", b.addr, "-G", group, "-e", "-q", "-X", "auto.offset.reset=earliest",
			"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", "-X", "auto.commit.interval.ms=100",
			"-f", "%p %o %s\n", topic)
		var recs []consumedRecord
		for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if line == "" {
				continue
			}
			var r consumedRecord
			if _, err := fmt.Sscanf(line, "%d %d %s", &r.Partition, &r.Offset, &r.Value); err != nil {
				t.Fatalf("kcat -G: unexpected output line %q: %v", line, err)
			}
			recs = append(recs, r)
		}
		t.Logf("kcat -G %s: %d records in %s", group, len(recs), time.Since(start).Round(time.Millisecond))
		return recs
	}

	first := produceSeq(t, b.addr, topic, partitions, "first", 200)
	if dups := checkConsumed(t, "kcat -G", consume(), first); dups != 0 {
		t.Errorf("kcat -G: %d duplicates", dups)
	}
	// kcat has exited: its close() committed, and the group has no members left.
	ends := waitCommittedAtEnd(t, adm, group, topic, 5*time.Second)
	if d := describeGroup(t, adm, group); d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("after kcat exited: group %s is %s with %d members, want Empty", group, d.State, len(d.Members))
	}

	if recs := consume(); len(recs) != 0 {
		t.Errorf("second kcat -G run read %d records (first: %+v), want none: the group committed %v", len(recs), recs[0], ends)
	}

	second := produceSeq(t, b.addr, topic, partitions, "second", 40)
	if dups := checkConsumed(t, "third kcat -G run", consume(), second); dups != 0 {
		t.Errorf("third kcat -G run: %d duplicates", dups)
	}
	waitCommittedAtEnd(t, adm, group, topic, 5*time.Second)
}
