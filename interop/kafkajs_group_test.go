package interop

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkajsGroupReport is the "report" event of kafkajs_group_test.js.
type kafkajsGroupReport struct {
	groupReport
	Joins int `json:"joins"`
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
	t.Parallel()
	node := needKafkajs(t)
	b := startBrokerConfig(t, groupBrokerConfig)
	const (
		topic      = "kafkajs-group"
		group      = "kafkajs-group-g"
		partitions = 6
	)
	adm := kadm.NewClient(newClient(t, b.addr))
	g := &groupRun{t: t, b: b, adm: adm, topic: topic, group: group, partitions: partitions,
		what: "kafkajs group", clientIDs: []string{"sluice-interop-kafkajs-0", "sluice-interop-kafkajs-1"},
		start: func(n, consumers string) *lineProc {
			return startNode(t, node, "kafkajs_group_test.js", b.addr, topic, group, n, consumers)
		}}
	var rep kafkajsGroupReport
	first, ends := g.twoConsumers(&rep)
	dups := checkConsumed(t, "kafkajs group", rep.Records, first)
	perConsumer := map[int]int{}
	for _, r := range rep.Records {
		perConsumer[r.Consumer]++
	}
	t.Logf("kafkajs group: %d deliveries (%d duplicates), per consumer %v, %d joins", len(rep.Records), dups, perConsumer, rep.Joins)

	// Leaving (LeaveGroup on disconnect) keeps the commits; a fresh consumer
	// (fromBeginning, but the group has commits) gets only the records produced next.
	g.resume(ends)

	// kafkajs's admin client on the (now Empty) group, ending with deleteGroups.
	checkEmptyGroupLag(t, adm, group, topic, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0})
	start := time.Now()
	pa := startNode(t, node, "kafkajs_group_test.js", "admin", b.addr, topic, group)
	t.Logf("kafkajs admin: %s in %s", pa.waitEvent("admin", 30*time.Second), time.Since(start).Round(time.Millisecond))
	pa.wait(10 * time.Second)
	if got, err := committed(adm, group, topic); err != nil || len(got) != 0 {
		t.Errorf("after kafkajs deleteGroups: committed %v (err %v), want none", got, err)
	}
	if d, err := describeGroupErr(adm, group); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("after kafkajs deleteGroups: DescribeGroups: %+v, err %v; want GROUP_ID_NOT_FOUND", d, err)
	}
}
