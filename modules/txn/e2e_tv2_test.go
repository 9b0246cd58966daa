package txn_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/recordbatch"
)

// Transaction version 2 by hand, over a socket (KIP-890 part 2): Produce v12 adds its
// partition, EndTxn v5 answers the bumped epoch (the same answer to a retry), and a
// write of the ended transaction that arrives after its marker is refused instead of
// opening a transaction no coordinator knows; the next transaction runs at the new
// epoch and commits.
func TestE2ETransactionVersion2Raw(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "tv2", 1)
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.Produce.Int16(), 12) // v13 names topics by id
	cl := b.Client(t, kgo.MaxVersions(v))
	ctx := ctxT(t, 30*time.Second)
	id := "tv2-raw"

	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = &id, 60000, -1, -1
	var pid int64
	var epoch int16
	for { // retried while the coordinator creates and loads __transaction_state
		r, err := init.RequestWith(ctx, cl)
		if err == nil && r.ErrorCode == 0 {
			pid, epoch = r.ProducerID, r.ProducerEpoch
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("InitProducerId: %v %+v", err, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	produce := func(e int16, seq int32, value string) int16 {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.TransactionID, req.Acks, req.TimeoutMillis = &id, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "tv2"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordbatch.Build(recordbatch.Options{ProducerID: pid, ProducerEpoch: e, BaseSequence: seq,
			Transactional: true}, recordbatch.Record{Value: []byte(value)})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version != 12 {
			t.Fatalf("Produce v%d, want v12", resp.Version)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	end := func(e int16, commit bool) *kmsg.EndTxnResponse {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, e, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 5 {
			t.Fatalf("EndTxn v%d, want v5", resp.Version)
		}
		return resp
	}

	// No AddPartitionsToTxn: Produce v12 adds the partition.
	if c := produce(epoch, 0, "a"); c != 0 {
		t.Fatalf("first produce: %v", kerr.ErrorForCode(c))
	}
	r := end(epoch, true)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn: %+v, want producer %d epoch %d", r, pid, epoch+1)
	}
	waitTxnState(t, b, id, "CompleteCommit")
	if r := end(epoch, true); r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("retried EndTxn: %+v", r)
	}
	// The ended transaction's late write: refused, nothing left open.
	if c := produce(epoch, 1, "late"); c != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("late produce of the ended epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(c))
	}
	// The next transaction at the new epoch (sequences restart at 0).
	if c := produce(epoch+1, 0, "b"); c != 0 {
		t.Fatalf("next transaction: %v", kerr.ErrorForCode(c))
	}
	if r := end(epoch+1, true); r.ErrorCode != 0 || r.ProducerEpoch != epoch+2 {
		t.Fatalf("second EndTxn: %+v", r)
	}
	// An abort with nothing in the transaction bumps the epoch too.
	waitTxnState(t, b, id, "CompleteCommit")
	if r := end(epoch+2, false); r.ErrorCode != 0 || r.ProducerEpoch != epoch+3 {
		t.Fatalf("empty abort: %+v", r)
	}
	writeEnds(t, b, "tv2", 1)
	if got := readAll(t, b, "tv2", 1, kgo.ReadCommitted()); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("read_committed: %v, want [a b]", got)
	}
}
