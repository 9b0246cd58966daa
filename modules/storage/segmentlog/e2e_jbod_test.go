package segmentlog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kclient"
	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// dirsOf is partition -> log dir as DescribeLogDirs says, and the dirs' errors.
func dirsOf(t *testing.T, adm *kadm.Client, topic string) (where map[int32]string, futures int, errs map[string]error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	where, errs = map[int32]string{}, map[string]error{}
	ds.Each(func(d kadm.DescribedLogDir) {
		errs[d.Dir] = d.Err
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic != topic {
				return
			}
			if p.IsFuture {
				futures++
				return
			}
			where[p.Partition] = d.Dir
		})
	})
	return where, futures, errs
}

// TestE2EJBOD: a broker with two log dirs (log.dirs) over real sockets. kadm sees
// both in DescribeLogDirs, moves replicas between them with AlterReplicaLogDirs while
// a producer writes (no acknowledged record lost, none twice), and when one dir is
// lost only its partitions answer KAFKA_STORAGE_ERROR.
func TestE2EJBOD(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	br := testbroker.Start(t, testbroker.WithConfig(fmt.Sprintf("configs:\n  log.dirs: %q\n", a+","+b)))
	ctx := context.Background()
	adm := br.Admin(t)
	const topic = "jbod"
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	testbroker.WaitFor(t, 10*time.Second, "the partitions in both dirs", func() string {
		where, _, _ := dirsOf(t, adm, topic)
		n := map[string]int{}
		for _, d := range where {
			n[d]++
		}
		if len(where) == 4 && n[a] == 2 && n[b] == 2 {
			return ""
		}
		return fmt.Sprint(where)
	})

	// A producer runs through the moves.
	cl := br.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(time.Millisecond))
	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := strconv.Itoa(i)
			r := &kgo.Record{Value: []byte(v)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Errorf("produce %s: %v", v, err)
				return
			}
			mu.Lock()
			acked[v] = true
			mu.Unlock()
		}
	}()
	testbroker.WaitFor(t, 10*time.Second, "some records", func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) >= 200 {
			return ""
		}
		return fmt.Sprint(len(acked))
	})

	// Everything to b; an unknown dir is refused.
	var req kadm.AlterReplicaLogDirsReq
	req.Add(b, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}, 3: {}}})
	req.Add("/no/such/dir", kadm.TopicsSet{topic: {9: {}}})
	res, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, req)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Partition == 9 {
			if !errors.Is(r.Err, kerr.LogDirNotFound) {
				t.Errorf("unknown dir: %v", r.Err)
			}
		} else if r.Err != nil {
			t.Errorf("move %d: %v", r.Partition, r.Err)
		}
	})
	testbroker.WaitFor(t, 20*time.Second, "every partition in b", func() string {
		where, futures, _ := dirsOf(t, adm, topic)
		for p := range int32(4) {
			if where[p] != b {
				return fmt.Sprintf("%v, %d futures", where, futures)
			}
		}
		if futures != 0 {
			return fmt.Sprintf("%d futures", futures)
		}
		return ""
	})
	if ents, _ := os.ReadDir(a); len(ents) > 0 {
		for _, e := range ents {
			if e.IsDir() {
				t.Errorf("left in a: %s", e.Name())
			}
		}
	}
	// And two back, so a holds partitions 0 and 1.
	req = nil
	req.Add(a, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if _, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, req); err != nil {
		t.Fatal(err)
	}
	testbroker.WaitFor(t, 20*time.Second, "partitions 0 and 1 in a", func() string {
		where, futures, _ := dirsOf(t, adm, topic)
		if where[0] == a && where[1] == a && where[2] == b && where[3] == b && futures == 0 {
			return ""
		}
		return fmt.Sprint(where)
	})
	close(stop)
	wg.Wait()

	// Every acknowledged record is there, once.
	testbroker.ExpectExactlyOnce(t, ctx, []string{br.Addr}, topic, acked)

	// Lose dir a (replaced by a file, as Kafka's tests do): its partitions go
	// offline, the others serve.
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, []byte("gone"), 0o644); err != nil {
		t.Fatal(err)
	}
	testbroker.WaitFor(t, 10*time.Second, "dir a failed", func() string {
		_, _, errs := dirsOf(t, adm, topic)
		if errors.Is(errs[a], kerr.KafkaStorageError) && errs[b] == nil {
			return ""
		}
		return fmt.Sprint(errs)
	})
	conn, err := kclient.Dial(ctx, br.Addr, kclient.Options{ClientID: "jbod"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for p := range int32(4) {
		preq := kmsg.NewPtrProduceRequest()
		preq.SetVersion(9)
		preq.Acks, preq.TimeoutMillis = -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, storagetest.Batch(0, time.Now().UnixMilli(), 1, 10)
		rt.Partitions = append(rt.Partitions, rp)
		preq.Topics = append(preq.Topics, rt)
		resp, err := conn.Request(ctx, preq)
		if err != nil {
			t.Fatal(err)
		}
		code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
		if want := map[bool]int16{true: kerr.KafkaStorageError.Code, false: 0}[p < 2]; code != want {
			t.Fatalf("produce to partition %d: %v, want %v", p, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
		}
	}
	// Moving a replica into the failed dir is refused.
	req = nil
	req.Add(a, kadm.TopicsSet{topic: {2: {}}})
	res, err = adm.AlterBrokerReplicaLogDirs(ctx, 1, req)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if !errors.Is(r.Err, kerr.KafkaStorageError) {
			t.Errorf("move into the failed dir: %v", r.Err)
		}
	})
}
