package interop

import (
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// librdkafkaGroupReport is the "report" event of librdkafka_group_test.py.
type librdkafkaGroupReport struct {
	groupReport
	Assigned map[string][][]int32 `json:"assigned"`
}

// TestLibrdkafkaGroup runs librdkafka_group_test.py (confluent-kafka subscribe() consumers)
// with auto-commit and with synchronous manual commits. In each mode two consumers in
// one group consume 300 records franz-go wrote over 6 partitions; both must get
// partitions (on_assign), every record must arrive, the committed offsets must reach the
// end offsets, and DescribeGroups/ListGroups/Lag must show the live group. After close()
// the group is Empty and lags by the 60 records produced next; a restarted consumer in
// the group gets exactly those 60 (no committed record again) and commits them.
func TestLibrdkafkaGroup(t *testing.T) {
	t.Parallel()
	needLibrdkafka(t)
	b := startBrokerConfig(t, groupBrokerConfig)
	adm := kadm.NewClient(newClient(t, b.addr))
	const partitions = 6

	for _, mode := range []string{"auto", "manual"} {
		t.Run(mode, func(t *testing.T) {
			topic, group := "lrk-group-"+mode, "lrk-group-"+mode+"-g"
			g := &groupRun{t: t, b: b, adm: adm, topic: topic, group: group, partitions: partitions,
				what: mode, clientIDs: []string{"sluice-interop-librdkafka-0", "sluice-interop-librdkafka-1"},
				start: func(n, consumers string) *lineProc {
					return startPython(t, "librdkafka_group_test.py", b.addr, topic, group, mode, n, consumers)
				}}
			var rep librdkafkaGroupReport
			first, ends := g.twoConsumers(&rep)
			dups := checkConsumed(t, mode, rep.Records, first)
			for _, c := range []string{"0", "1"} {
				got := false
				for _, ps := range rep.Assigned[c] {
					got = got || len(ps) > 0
				}
				if !got {
					t.Errorf("%s: consumer %s never got a partition (on_assign: %v)", mode, c, rep.Assigned)
				}
			}
			t.Logf("%s: %d deliveries (%d duplicates), assignments %v", mode, len(rep.Records), dups, rep.Assigned)
			// After close() the group is Empty and a restarted consumer resumes.
			g.resume(ends)
		})
	}
}

// TestLibrdkafkaGroupBrokerRestart: a librdkafka group consumer (auto-commit) that has
// consumed and committed 200 records keeps running while the broker is SIGKILLed and
// restarted on the same data dir; the commits survive, the coordinator restores the
// group from its last group metadata record (written before the leader's SyncGroup was
// answered), so the consumer keeps its member id and generation without a rebalance,
// its commits keep succeeding, it gets the 40 records produced after the restart, and
// no record is delivered twice.
func TestLibrdkafkaGroupBrokerRestart(t *testing.T) {
	t.Parallel()
	needLibrdkafka(t)
	const (
		topic      = "lrk-group-restart"
		group      = "lrk-group-restart-g"
		partitions = 4
	)
	b, adm := startGroupBroker(t, topic, partitions)
	all := produceSeq(t, b.addr, topic, partitions, "first", 200)

	p := startLineProc(t, pythonEnv("LRK_DEBUG="+os.Getenv("LRK_DEBUG")), systemPython, "librdkafka_group_test.py", b.addr, topic, group, "auto", "200", "1")
	p.waitEvent("consumed", 45*time.Second)
	ends := waitCommittedAtEnd(t, adm, group, topic, 20*time.Second)
	d0 := waitStableGroup(t, adm, group, topic, partitions, 1, 20*time.Second)

	b.kill()
	start := time.Now()
	b.start()
	adm = kadm.NewClient(newClient(t, b.addr))
	if got, err := committed(adm, group, topic); err != nil || !mapsEqual(got, ends) {
		t.Fatalf("after SIGKILL and restart: committed %v (err %v), want %v", got, err, ends)
	}
	second := produceSeq(t, b.addr, topic, partitions, "second", 40)
	for p, offs := range second {
		for o, v := range offs {
			all[p][o] = v
		}
	}
	p.send("expect 240")
	p.waitEvent("consumed", 45*time.Second)
	t.Logf("the consumer got the records produced after the restart %s after it", time.Since(start).Round(time.Millisecond))
	waitCommittedAtEnd(t, adm, group, topic, 20*time.Second)
	d := waitStableGroup(t, adm, group, topic, partitions, 1, 20*time.Second)
	var rep librdkafkaGroupReport
	p.stopReport(&rep)
	if got, err := committed(adm, group, topic); err != nil || !mapsEqual(got, endOffsets(t, adm, topic)) {
		t.Errorf("after the consumer closed: committed %v (err %v), want the end offsets %v", got, err, endOffsets(t, adm, topic))
	}
	// The group was restored, not rejoined: same member (modules/groups/restore.go).
	if d.Members[0].MemberID != d0.Members[0].MemberID {
		t.Errorf("member %s after the restart, was %s: the consumer had to rejoin", d.Members[0].MemberID, d0.Members[0].MemberID)
	}
	// No record comes twice: neither one committed before the kill nor one consumed
	// after it (the consumer's commits with its generation are accepted by the
	// restored group, so nothing is refused and re-fetched from an older commit).
	dups := checkConsumed(t, "across the restart", rep.Records, all)
	if dups > 0 {
		t.Errorf("%d records delivered twice across the restart", dups)
	}
	t.Logf("%d records, assignments %v; after the restart the group is %s with member %s (before: %s)",
		len(rep.Records), rep.Assigned, d.State, d.Members[0].MemberID, d0.Members[0].MemberID)
}

// TestLibrdkafkaGroupMemberKilled: two librdkafka consumer processes share a group; one
// is SIGKILLed (no LeaveGroup), so the broker must expire it after its 6s session
// timeout and rebalance: the survivor ends up alone in a Stable group with all the
// partitions, consumes the records produced after the kill from every partition and
// commits them.
func TestLibrdkafkaGroupMemberKilled(t *testing.T) {
	t.Parallel()
	needLibrdkafka(t)
	const (
		topic      = "lrk-group-kill"
		group      = "lrk-group-kill-g"
		partitions = 4
	)
	b, adm := startGroupBroker(t, topic, partitions)
	produceSeq(t, b.addr, topic, partitions, "first", 100)

	survivor := startPython(t, "librdkafka_group_test.py", b.addr, topic, group, "auto", "1", "1", "0")
	victim := startPython(t, "librdkafka_group_test.py", b.addr, topic, group, "auto", "1", "1", "1")
	d := waitStableGroup(t, adm, group, topic, partitions, 2, 30*time.Second)
	waitCommittedAtEnd(t, adm, group, topic, 20*time.Second)
	var victimParts []int32
	for _, m := range d.Members {
		if m.ClientID == "sluice-interop-librdkafka-1" {
			victimParts = memberPartitions(m, topic)
		}
	}
	if len(victimParts) == 0 {
		t.Fatalf("DescribeGroups: no partitions for sluice-interop-librdkafka-1 in %+v", d.Members)
	}

	victim.kill()
	start := time.Now()
	second := produceSeq(t, b.addr, topic, partitions, "second", 40)
	d = waitStableGroup(t, adm, group, topic, partitions, 1, 30*time.Second)
	if d.Members[0].ClientID != "sluice-interop-librdkafka-0" {
		t.Errorf("after the kill: the remaining member is %+v, want client sluice-interop-librdkafka-0", d.Members[0])
	}
	t.Logf("the killed member's partitions %v went to the survivor %s after the kill", victimParts, time.Since(start).Round(time.Millisecond))
	waitCommittedAtEnd(t, adm, group, topic, 20*time.Second)
	var rep librdkafkaGroupReport
	survivor.stopReport(&rep)
	var fromSecond []consumedRecord
	for _, r := range rep.Records {
		if _, ok := second[r.Partition][r.Offset]; ok {
			fromSecond = append(fromSecond, r)
		}
	}
	if dups := checkConsumed(t, "survivor, records produced after the kill", fromSecond, second); dups != 0 {
		t.Errorf("survivor: %d records produced after the kill delivered twice", dups)
	}
}
