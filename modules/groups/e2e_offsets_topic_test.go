package groups_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestOffsetsTopicSegmentBytes: __consumer_offsets is created on the first
// FindCoordinator, compacted, with segment.bytes from offsets.topic.segment.bytes.
func TestOffsetsTopicSegmentBytes(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig+`  offsets.topic.segment.bytes: "1048576"
`))
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		res := adm.FindGroupCoordinators(ctx, "g")
		if res["g"].Err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("find coordinator: %v", res["g"].Err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("__consumer_offsets", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe: %v %v", err, rc.Err)
	}
	want := map[string]string{"segment.bytes": "1048576", "cleanup.policy": "compact"}
	for _, c := range rc.Configs {
		if w, ok := want[c.Key]; ok {
			if c.MaybeValue() != w {
				t.Errorf("%s = %q, want %q", c.Key, c.MaybeValue(), w)
			}
			delete(want, c.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("not described: %v", want)
	}
}
