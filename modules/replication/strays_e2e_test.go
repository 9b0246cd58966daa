package replication_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionDirs lists the partition-like directories (and moved-aside ones) in a
// broker's data dir.
func partitionDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && (strings.HasPrefix(e.Name(), "gone-") || strings.HasPrefix(e.Name(), "moved-") ||
			strings.HasPrefix(e.Name(), "stays-") || strings.HasSuffix(e.Name(), "-stray")) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// A broker that was down while a topic was deleted and while one of its replicas was
// reassigned away removes those partition directories once it registered again, and
// keeps the rest (which it still serves).
func TestClusterStrayPartitionsRemoved(t *testing.T) {
	c := startCluster(t, 3, "segmentlog", nil)
	c.createTopic("gone", 2, 3, nil)
	c.createTopic("moved", 1, 3, nil)
	c.createTopic("stays", 1, 3, nil)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, topic := range []string{"gone", "moved", "stays"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dir := c.nodes[2].dir
	if got, want := partitionDirs(t, dir), []string{"gone-0", "gone-1", "moved-0", "stays-0"}; !slices.Equal(got, want) {
		t.Fatalf("broker 3 holds %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.properties")); err != nil {
		t.Fatalf("no meta.properties after the first start: %v", err)
	}

	c.stop(3)
	adm := kadm.NewClient(c.client())
	if res, err := adm.DeleteTopic(ctx, "gone"); err != nil || res.Err != nil {
		t.Fatalf("delete: %v %v", err, res.Err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moved", 0, []int32{1, 2})
	if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
		t.Fatalf("reassign: %v %v", err, res.Error())
	}
	c.eventually(30*time.Second, "moved-0 reassigned to 1 and 2", func() bool {
		pi := c.image(1).Partition("moved", 0)
		return pi != nil && slices.Equal(pi.Replicas, []int32{1, 2}) && pi.AddingReplicas == nil
	})

	c.restart(3)
	c.eventually(30*time.Second, "broker 3 without the strays", func() bool {
		return slices.Equal(partitionDirs(t, dir), []string{"stays-0"})
	})
	// What stays is still served by broker 3 (as a replica that catches up).
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "stays", Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.eventually(30*time.Second, "stays-0 replicated to broker 3", func() bool {
		pi := c.image(3).Partition("stays", 0)
		return pi != nil && slices.Contains(pi.ISR, 3)
	})
}
