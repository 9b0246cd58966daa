package interop

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkajsGroupReport is the "report" event of kafkajs_group_test.js.
type kafkajsGroupReport struct {
	Records []consumedRecord `json:"records"`
	Joins   int              `json:"joins"`
}

// TestKafkajsGroup: two kafkajs consumers in one group (consumer.run with eachMessage,
// auto-commit) consume 300 records franz-go wrote over 6 partitions; while they run the
// group is Stable with both members sharing the partitions (DescribeGroups, ListGroups,
// Lag 0 once the commits reach the end offsets). After they leave, the group is Empty
// and Lag counts the 60 records produced next; a fresh kafkajs consumer in the group then
// resumes from the committed offsets: it gets exactly those 60 and commits them. Last,
// kafkajs's admin client lists, describes, fetches the offsets of, sets offsets for and
// deletes the Empty group (its setOffsets alone takes 5s, client-side).
func TestKafkajsGroup(t *testing.T) {
	node := needKafkajs(t)
	b := startBrokerConfig(t, groupBrokerConfig)
	const (
		topic      = "kafkajs-group"
		group      = "kafkajs-group-g"
		partitions = 6
	)
	createTopic(t, b.addr, topic, partitions)
	first := produceSeq(t, b.addr, topic, partitions, "first", 300)
	adm := kadm.NewClient(newClient(t, b.addr))
	env := []string{"KAFKAJS_NO_PARTITIONER_WARNING=1"}

	start := time.Now()
	p := startLineProc(t, env, node, "kafkajs_group_test.js", b.addr, topic, group, "300", "2")
	p.waitEvent("consumed", 45*time.Second)
	t.Logf("two kafkajs consumers consumed 300 records in %s", time.Since(start).Round(time.Millisecond))
	ends := waitCommittedAtEnd(t, adm, group, topic, 20*time.Second)
	checkLiveGroup(t, adm, group, topic, partitions, []string{"sluice-interop-kafkajs-0", "sluice-interop-kafkajs-1"})
	p.send("stop")
	var rep kafkajsGroupReport
	if err := json.Unmarshal([]byte(p.waitEvent("report", 30*time.Second)), &rep); err != nil {
		t.Fatalf("kafkajs report: %v", err)
	}
	p.wait(10 * time.Second)
	dups := checkConsumed(t, "kafkajs group", rep.Records, first)
	perConsumer := map[int]int{}
	for _, r := range rep.Records {
		perConsumer[r.Consumer]++
	}
	t.Logf("kafkajs group: %d deliveries (%d duplicates), per consumer %v, %d joins", len(rep.Records), dups, perConsumer, rep.Joins)

	// Leaving (LeaveGroup on disconnect) keeps the commits; the group is Empty and lags by
	// exactly what is produced next.
	if got, err := committed(adm, group, topic); err != nil || !mapsEqual(got, ends) {
		t.Fatalf("after the consumers left: committed %v (err %v), want %v", got, err, ends)
	}
	second := produceSeq(t, b.addr, topic, partitions, "second", 60)
	wantLag := map[int32]int64{}
	for p := range second {
		wantLag[p] = int64(len(second[p]))
	}
	checkEmptyGroupLag(t, adm, group, topic, wantLag)

	// A fresh consumer (fromBeginning, but the group has commits) gets only the new ones.
	start = time.Now()
	p2 := startLineProc(t, env, node, "kafkajs_group_test.js", b.addr, topic, group, "60", "1")
	p2.waitEvent("consumed", 30*time.Second)
	waitCommittedAtEnd(t, adm, group, topic, 20*time.Second)
	p2.send("stop")
	var rep2 kafkajsGroupReport
	if err := json.Unmarshal([]byte(p2.waitEvent("report", 30*time.Second)), &rep2); err != nil {
		t.Fatalf("kafkajs report: %v", err)
	}
	p2.wait(10 * time.Second)
	if dups := checkConsumed(t, "kafkajs group after restart", rep2.Records, second); dups != 0 {
		t.Errorf("kafkajs group after restart: %d duplicates (single consumer, no rebalance)", dups)
	}
	t.Logf("restarted kafkajs consumer resumed at the committed offsets: %d records in %s", len(rep2.Records), time.Since(start).Round(time.Millisecond))

	// kafkajs's admin client on the (now Empty) group, ending with deleteGroups.
	checkEmptyGroupLag(t, adm, group, topic, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0})
	start = time.Now()
	pa := startLineProc(t, env, node, "kafkajs_group_test.js", "admin", b.addr, topic, group)
	t.Logf("kafkajs admin: %s in %s", pa.waitEvent("admin", 30*time.Second), time.Since(start).Round(time.Millisecond))
	pa.wait(10 * time.Second)
	if got, err := committed(adm, group, topic); err != nil || len(got) != 0 {
		t.Errorf("after kafkajs deleteGroups: committed %v (err %v), want none", got, err)
	}
	if d, err := describeGroupErr(adm, group); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("after kafkajs deleteGroups: DescribeGroups: %+v, err %v; want GROUP_ID_NOT_FOUND", d, err)
	}
}
