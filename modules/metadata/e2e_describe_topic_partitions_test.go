package metadata_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// dtpPage is one DescribeTopicPartitions answer in short: "topic/partition" for each
// partition, "topic:ERROR" for a topic error, and the cursor ("" for none).
func dtpPage(t *testing.T, cl *kgo.Client, topics []string, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor) (got []string, next string) {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		name := *rt.Topic
		if rt.ErrorCode != 0 {
			got = append(got, name+":"+kerr.ErrorForCode(rt.ErrorCode).(*kerr.Error).Message)
			continue
		}
		if rt.TopicID == ([16]byte{}) || rt.AuthorizedOperations == -2147483648 {
			t.Errorf("%s: topic id %v, authorized operations %d", name, rt.TopicID, rt.AuthorizedOperations)
		}
		for _, p := range rt.Partitions {
			got = append(got, fmt.Sprintf("%s/%d", name, p.Partition))
			if p.ErrorCode != 0 || p.LeaderID != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) ||
				p.EligibleLeaderReplicas == nil || len(p.EligibleLeaderReplicas) != 0 || p.LastKnownELR == nil {
				t.Errorf("%s/%d: %+v", name, p.Partition, p)
			}
		}
	}
	if c := resp.NextCursor; c != nil {
		next = fmt.Sprintf("%s/%d", c.Topic, c.Partition)
	}
	return got, next
}

func cursor(topic string, partition int32) *kmsg.DescribeTopicPartitionsRequestCursor {
	return &kmsg.DescribeTopicPartitionsRequestCursor{Topic: topic, Partition: partition}
}

// TestDescribeTopicPartitions pages through topics with Kafka's cursor rules.
func TestDescribeTopicPartitions(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig("configs: {max.request.partition.size.limit: \"5\"}\n"))
	adm := b.Admin(t)
	ctx := testCtx(t)
	for name, n := range map[string]int32{"a": 3, "b": 2, "c": 1} {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	cl := b.Client(t)
	for _, tc := range []struct {
		what   string
		topics []string
		limit  int32
		cursor *kmsg.DescribeTopicPartitionsRequestCursor
		want   []string
		next   string
	}{
		{"a page ending inside a topic", []string{"c", "b", "a"}, 4, nil, []string{"a/0", "a/1", "a/2", "b/0"}, "b/1"},
		{"from a cursor", []string{"c", "b", "a"}, 4, cursor("b", 1), []string{"b/1", "c/0"}, ""},
		{"a page ending with a topic", []string{"a", "b", "c"}, 3, nil, []string{"a/0", "a/1", "a/2"}, "b/0"},
		{"unknown topics take no room", []string{"a", "zz", "b", "c"}, 3, cursor("b", 0), []string{"b/0", "b/1", "c/0"}, "zz/0"},
		{"then the unknown topic", []string{"a", "zz", "b", "c"}, 3, cursor("zz", 0), []string{"zz:UNKNOWN_TOPIC_OR_PARTITION"}, ""},
		{"the broker's limit (5) caps the client's", []string{"a", "b", "c"}, 2000, nil, []string{"a/0", "a/1", "a/2", "b/0", "b/1"}, "c/0"},
		{"no topics: every topic", nil, 2000, cursor("b", 1), []string{"b/1", "c/0"}, ""},
		{"a cursor outside the list", []string{"a", "c"}, 10, cursor("b", 0), []string{"a:INVALID_REQUEST", "c:INVALID_REQUEST"}, ""},
		{"a negative cursor partition", []string{"a"}, 10, cursor("a", -1), []string{"a:INVALID_REQUEST"}, ""},
		{"a cursor past the last partition", []string{"a", "b"}, 10, cursor("a", 7), []string{"b/0", "b/1"}, ""},
	} {
		got, next := dtpPage(t, cl, tc.topics, tc.limit, tc.cursor)
		if !slices.Equal(got, tc.want) || next != tc.next {
			t.Errorf("%s: got %v next %q, want %v next %q", tc.what, got, next, tc.want, tc.next)
		}
	}
}
