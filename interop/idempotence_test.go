package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
)

// rawProducer sends hand-built record batches of one producer id and epoch to partition 0
// of a topic with raw Produce requests, so a test can resend a batch byte for byte.
type rawProducer struct {
	t       *testing.T
	cl      *kgo.Client
	topic   string
	topicID [16]byte // Produce v13+ names topics by id
	pid     int64
	epoch   int16
}

// initProducerID issues InitProducerId (no transactional id: an idempotent producer) and
// returns the producer id and epoch.
func initProducerID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	req.ProducerID = -1
	req.ProducerEpoch = -1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	if resp.ProducerID < 0 || resp.ProducerEpoch < 0 {
		t.Fatalf("InitProducerId: producer id %d epoch %d", resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// topicID returns the id Metadata gives topic.
func topicID(t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("metadata %q: %v", topic, err)
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		t.Fatalf("metadata %q: %v (found: %v)", topic, td.Err, ok)
	}
	return td.ID
}

// idemValue is record i of batch k.
func idemValue(k, i int) string { return fmt.Sprintf("batch%03d-rec%d", k, i) }

// batch returns batch k of n records with base sequence seq.
func (p *rawProducer) batch(k, n int, seq int32) []byte {
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{Value: []byte(idemValue(k, i))}
	}
	return recordbatch.Build(recordbatch.Options{
		BaseTimestamp: time.Now().UnixMilli(),
		ProducerID:    p.pid,
		ProducerEpoch: p.epoch,
		BaseSequence:  seq,
	}, recs...)
}

// produce sends one batch with acks=-1 and returns the partition's answer; it fails the
// test when the request itself fails.
func (p *rawProducer) produce(batch []byte) (int64, error) {
	p.t.Helper()
	off, err := p.produceNoFatal(batch)
	if errors.Is(err, errRequest) {
		p.t.Fatal(err)
	}
	return off, err
}

// errRequest wraps a Produce request that got no answer.
var errRequest = errors.New("produce request failed")

// produceNoFatal is produce for other goroutines than the test's: it returns an error
// wrapping errRequest when the request fails.
func (p *rawProducer) produceNoFatal(batch []byte) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 20000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = p.topic
	rt.TopicID = p.topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, p.cl)
	if err != nil {
		return -1, fmt.Errorf("%w: %w", errRequest, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("%w: answer for %d topics, want one topic with one partition", errRequest, len(resp.Topics))
	}
	part := resp.Topics[0].Partitions[0]
	return part.BaseOffset, kerr.ErrorForCode(part.ErrorCode)
}

// TestIdempotentDuplicateSends is an idempotent producer's retries made by hand: raw
// Produce requests (acks=-1) of batches with one producer id and epoch, 3 records each.
// Batches 0-7 go in order; then batches 3-7 (the last five, Kafka's dedup window) are
// resent three times in reverse order: each answer is a success carrying the batch's
// original base offset, and nothing is appended. A batch with a sequence gap gets
// OUT_OF_ORDER_SEQUENCE_NUMBER. The broker is SIGKILLed and restarted on its data dir,
// and the same duplicates again get their original offsets (producer state rebuilt from
// the log), a new InitProducerId gets another producer id, the gap is still refused, and
// batches 8-9 continue the sequence; batch 10 sent at once over four connections is
// appended once and all four get its offset. The partition then holds each record
// exactly once, in order.
func TestIdempotentDuplicateSends(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		topic    = "idem-dups"
		perBatch = 3
	)
	createTopic(t, b.addr, topic, 1)
	cl := newClient(t, b.addr)
	pid, epoch := initProducerID(t, cl)
	p := &rawProducer{t: t, cl: cl, topic: topic, topicID: topicID(t, cl, topic), pid: pid, epoch: epoch}
	t.Logf("producer id %d epoch %d", pid, epoch)

	batches := map[int][]byte{}
	offsets := map[int]int64{}
	send := func(k int) {
		t.Helper()
		batches[k] = p.batch(k, perBatch, int32(k*perBatch))
		off, err := p.produce(batches[k])
		if err != nil {
			t.Fatalf("batch %d (first send): %v", k, err)
		}
		if want := int64(k * perBatch); off != want {
			t.Errorf("batch %d: base offset %d, want %d", k, off, want)
		}
		offsets[k] = off
	}
	resend := func(when string, k int) {
		t.Helper()
		off, err := p.produce(batches[k])
		if err != nil {
			t.Errorf("%s: duplicate of batch %d: %v, want success with its original offset %d", when, k, err, offsets[k])
		} else if off != offsets[k] {
			t.Errorf("%s: duplicate of batch %d: base offset %d, want the original %d", when, k, off, offsets[k])
		}
	}
	gap := func(when string, next int) {
		t.Helper()
		// Sequence of the batch after next: one batch missing.
		off, err := p.produce(p.batch(900, perBatch, int32((next+1)*perBatch)))
		if !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
			t.Errorf("%s: batch with a sequence gap: error %v (offset %d), want OUT_OF_ORDER_SEQUENCE_NUMBER", when, err, off)
		}
	}

	for k := range 8 {
		send(k)
	}
	for range 3 {
		for k := 7; k >= 3; k-- {
			resend("before the restart", k)
		}
	}
	gap("before the restart", 8)

	b.kill()
	b.start()
	// Producer ids stay unique across restarts.
	if pid2, _ := initProducerID(t, cl); pid2 == pid {
		t.Errorf("InitProducerId after the restart handed out producer id %d again", pid)
	}
	for range 2 {
		for k := 7; k >= 3; k-- {
			resend("after SIGKILL and restart", k)
		}
	}
	gap("after SIGKILL and restart", 8)
	send(8)
	send(9)
	resend("after SIGKILL and restart", 9)
	resend("after SIGKILL and restart", 8)

	// Batch 10 sent at once over four connections: one append, four equal answers.
	const senders = 4
	batches[10] = p.batch(10, perBatch, 10*perBatch)
	clients := make([]*rawProducer, senders)
	for i := range clients {
		c := *p
		c.cl = newClient(t, b.addr)
		clients[i] = &c
	}
	type answer struct {
		off int64
		err error
	}
	answers := make([]answer, senders)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].off, answers[i].err = c.produceNoFatal(batches[10])
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.err != nil || a.off != 10*perBatch {
			t.Errorf("concurrent send %d of batch 10: offset %d, error %v; want offset %d and no error", i, a.off, a.err, 10*perBatch)
		}
	}

	const total = 11 * perBatch
	got := fetchAll(t, b.addr, topic, []int32{0}, 30*time.Second)[0]
	if len(got) != total {
		t.Errorf("partition holds %d records, want %d (11 batches of %d, each once)", len(got), total, perBatch)
	}
	for i, r := range got {
		want := idemValue(i/perBatch, i%perBatch)
		if r.Offset != int64(i) || string(r.Value) != want {
			t.Errorf("record %d: offset %d value %q, want offset %d value %q", i, r.Offset, r.Value, i, want)
		}
		if r.ProducerID != pid || r.ProducerEpoch != epoch {
			t.Errorf("record %d: producer %d epoch %d, want %d/%d", i, r.ProducerID, r.ProducerEpoch, pid, epoch)
		}
	}
}

// TestIdempotentProducerBrokerKills runs one default (idempotent, acks=all) franz-go
// producer across three broker SIGKILLs and restarts: the same client keeps producing
// numbered records to two partitions while the broker dies, and retries whatever was in
// flight once it is back, so the restarted broker must recognise batches it had already
// appended (producer state recovered from the log). Afterwards every record the producer
// was given was acknowledged, and each partition holds every one exactly once, in order,
// at the offset it was acknowledged with.
func TestIdempotentProducerBrokerKills(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, txnBrokerConfig)
	const (
		partitions = 2
		kills      = 3
		perRound   = 2000 // acknowledged records between kills
	)
	createTopic(t, b.addr, crashTopic, partitions)

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.addr),
		kgo.ClientID("sluice-interop-idempotent"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(1000),
		kgo.ProducerBatchMaxBytes(8<<10), // many batches in flight when the broker dies
	)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer cl.Close()

	numbered := newSeqRecords(crashTopic, partitions, crashValue)
	// Background context: a cancelled context would fail buffered records.
	run := numbered.start(cl, context.Background())
	defer run.halt()

	for round := 1; round <= kills+1; round++ {
		target := numbered.ackedCount() + perRound // progress after each restart, before the next kill
		if !pollUntil(90*time.Second, func() bool { return numbered.ackedCount() >= target }) {
			f, fe := numbered.failures()
			t.Fatalf("round %d: %d records acknowledged within 90s, want %d (failed: %d, first: %v)", round, numbered.ackedCount(), target, f, fe)
		}
		if round <= kills {
			b.kill()
			t.Logf("round %d: SIGKILL after %d acknowledged records", round, numbered.ackedCount())
			b.start()
		}
	}
	run.halt()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	run.wait()

	nextSeq, acked := numbered.snapshot()
	if failed, firstErr := numbered.failures(); failed > 0 {
		t.Errorf("%d records failed, first: %v (an idempotent producer with unlimited retries should lose none)", failed, firstErr)
	}
	got := fetchAll(t, b.addr, crashTopic, partitionList(partitions), 60*time.Second)
	for p := range int32(partitions) {
		recs := got[p]
		if int64(len(recs)) != nextSeq[p] {
			t.Errorf("partition %d: %d records, the producer sent %d (each exactly once)", p, len(recs), nextSeq[p])
		}
		bad := 0
		for i, r := range recs {
			seq, ok := crashParse(p, r.Value)
			if r.ProducerID < 0 {
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: record %d was not written by an idempotent producer (producer id %d): did the client fall back?", p, i, r.ProducerID)
				}
			}
			if !ok || seq != int64(i) || r.Offset != int64(i) {
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: record %d: offset %d value %.40q, want offset %d seq %d", p, i, r.Offset, r.Value, i, i)
				}
			}
		}
		for _, a := range acked[p] {
			if a.offset != a.seq {
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: seq %d acknowledged at offset %d, want %d", p, a.seq, a.offset, a.seq)
				}
			}
		}
		if bad > 10 {
			t.Errorf("partition %d: %d more problems", p, bad-10)
		}
		t.Logf("partition %d: %d records sent, %d acknowledged, %d read back", p, nextSeq[p], len(acked[p]), len(recs))
	}
}
