package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatMetadata is the part of `kcat -L -J` output the test checks.
type kcatMetadata struct {
	OriginatingBroker struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"originating_broker"`
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
			Error     string
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

func needKcat(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		need(t, "kcat is not installed (apt-get install kcat)")
	}
	return p
}

// TestKcatMetadata: `kcat -L` lists broker 1 at the listener address and the topics with
// their partitions, leader and replicas.
func TestKcatMetadata(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t)
	createTopic(t, b.addr, "kcat-meta-one", 1)
	createTopic(t, b.addr, "kcat-meta-three", 3)

	// Plain output, as a person would run it.
	plain := run(t, 30*time.Second, "", kcat, "-b", b.addr, "-L")
	if want := "broker 1 at " + b.addr; !strings.Contains(plain, want) {
		t.Errorf("kcat -L output lacks %q:\n%s", want, plain)
	}

	out := run(t, 30*time.Second, "", kcat, "-b", b.addr, "-L", "-J")
	var md kcatMetadata
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J: bad JSON: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != b.addr {
		t.Errorf("kcat -L brokers = %+v, want exactly broker 1 at %s", md.Brokers, b.addr)
	}
	if md.OriginatingBroker.ID != 1 {
		t.Errorf("kcat -L originating broker = %+v, want id 1", md.OriginatingBroker)
	}
	want := map[string]int{"kcat-meta-one": 1, "kcat-meta-three": 3}
	for _, tp := range md.Topics {
		n, ok := want[tp.Topic]
		if !ok {
			continue
		}
		delete(want, tp.Topic)
		if tp.Error != "" {
			t.Errorf("topic %s: error %q", tp.Topic, tp.Error)
		}
		if len(tp.Partitions) != n {
			t.Errorf("topic %s: %d partitions, want %d", tp.Topic, len(tp.Partitions), n)
		}
		seen := map[int32]bool{}
		for _, p := range tp.Partitions {
			seen[p.Partition] = true
			if p.Leader != 1 || len(p.Replicas) != 1 || p.Replicas[0].ID != 1 || len(p.ISRs) != 1 || p.ISRs[0].ID != 1 {
				t.Errorf("topic %s partition %d: leader %d replicas %+v isrs %+v, want leader 1, replicas [1], isrs [1]",
					tp.Topic, p.Partition, p.Leader, p.Replicas, p.ISRs)
			}
		}
		for i := int32(0); i < int32(n); i++ {
			if !seen[i] {
				t.Errorf("topic %s: partition %d missing", tp.Topic, i)
			}
		}
	}
	for name := range want {
		t.Errorf("kcat -L does not list topic %s:\n%s", name, out)
	}
}

// TestKcatProduceConsume: keyed messages with headers, produced by kcat in three runs
// (one lz4-compressed), consumed back by kcat from the beginning with exact
// key/value/headers/offset.
func TestKcatProduceConsume(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t)
	const topic = "kcat-keyed"
	createTopic(t, b.addr, topic, 1)

	produce := func(stdin string, extra ...string) {
		t.Helper()
		args := append([]string{"-b", b.addr, "-P", "-t", topic, "-p", "0", "-K:", "-X", "acks=all"}, extra...)
		run(t, 30*time.Second, stdin, kcat, args...)
	}
	produce("alpha:one\nbeta:two\n", "-H", "trace=abc", "-H", "source=kcat")
	produce("gamma:three\ndelta:x:y\n", "-H", "only=1")
	// A batch of 50 compressible values, lz4.
	var sb strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&sb, "k%02d:%s\n", i, strings.Repeat("v", 100+i))
	}
	produce(sb.String(), "-z", "lz4", "-H", "codec=lz4")

	want := []string{
		"o=0 k=alpha v=one h=trace=abc,source=kcat",
		"o=1 k=beta v=two h=trace=abc,source=kcat",
		"o=2 k=gamma v=three h=only=1",
		"o=3 k=delta v=x:y h=only=1",
	}
	for i := 0; i < 50; i++ {
		want = append(want, fmt.Sprintf("o=%d k=k%02d v=%s h=codec=lz4", 4+i, i, strings.Repeat("v", 100+i)))
	}

	out := run(t, 30*time.Second, "", kcat, "-b", b.addr, "-C", "-t", topic, "-p", "0",
		"-o", "beginning", "-e", "-q", "-f", "o=%o k=%k v=%s h=%h\n")
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(got) != len(want) {
		t.Errorf("kcat consumed %d messages, want %d", len(got), len(want))
	}
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			t.Errorf("message %d:\n got %q\nwant %q", i, got[i], want[i])
		}
	}

	// Start in the middle: offset 2 onwards, two messages only.
	out = run(t, 30*time.Second, "", kcat, "-b", b.addr, "-C", "-t", topic, "-p", "0",
		"-o", "2", "-c", "2", "-e", "-q", "-f", "o=%o k=%k v=%s h=%h\n")
	if got, want := strings.TrimRight(out, "\n"), want[2]+"\n"+want[3]; got != want {
		t.Errorf("kcat -o 2 -c 2:\n got %q\nwant %q", got, want)
	}
}

// TestKcatAutoCreate: producing to a topic nobody created works (the README promises
// auto.create.topics.enable on by default) and the records read back.
func TestKcatAutoCreate(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t)
	const topic = "kcat-auto-created"
	run(t, 30*time.Second, "k1:hello\nk2:world\n", kcat, "-b", b.addr, "-P", "-t", topic, "-K:", "-H", "source=auto")
	out := run(t, 30*time.Second, "", kcat, "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
		"-f", "%p/%o %k=%s %h\n")
	if got, want := out, "0/0 k1=hello source=auto\n0/1 k2=world source=auto\n"; got != want {
		t.Errorf("kcat consume of an auto-created topic:\n got %q\nwant %q", got, want)
	}
}

// TestKcatOffsets: kcat start positions that need ListOffsets: by timestamp (s@ms, over
// records franz-go wrote with explicit create times), relative to the end (-o -N), and
// the end itself (nothing to read).
func TestKcatOffsets(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	b := startBroker(t)
	const topic = "kcat-offsets"
	createTopic(t, b.addr, topic, 1)

	cl := newClient(t, b.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("t%d", i)),
			Value: []byte(fmt.Sprintf("at+%ds", i)), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce with explicit timestamps: %v", err)
	}

	consume := func(offset string) string {
		t.Helper()
		return run(t, 30*time.Second, "", kcat, "-b", b.addr, "-C", "-t", topic, "-p", "0", "-o", offset,
			"-e", "-q", "-f", "%o %T %k=%s\n")
	}
	line := func(i int) string {
		return fmt.Sprintf("%d %d t%d=at+%ds\n", i, base.Add(time.Duration(i)*time.Second).UnixMilli(), i, i)
	}
	lines := func(from, to int) string {
		var sb strings.Builder
		for i := from; i < to; i++ {
			sb.WriteString(line(i))
		}
		return sb.String()
	}
	tests := []struct{ name, offset, want string }{
		{"beginning", "beginning", lines(0, 10)},
		{"exact timestamp", fmt.Sprintf("s@%d", base.Add(4*time.Second).UnixMilli()), lines(4, 10)},
		{"between timestamps", fmt.Sprintf("s@%d", base.Add(6500*time.Millisecond).UnixMilli()), lines(7, 10)},
		{"before the first", fmt.Sprintf("s@%d", base.Add(-time.Hour).UnixMilli()), lines(0, 10)},
		{"after the last", fmt.Sprintf("s@%d", base.Add(time.Hour).UnixMilli()), ""},
		{"relative to the end", "-3", lines(7, 10)},
		{"absolute", "5", lines(5, 10)},
		{"end", "end", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := consume(tc.offset); got != tc.want {
				t.Errorf("kcat -o %s:\n got %q\nwant %q", tc.offset, got, tc.want)
			}
		})
	}
}
