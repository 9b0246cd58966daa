// AddPartitionsToTxn: v0-v5. v0-v3 are the client form (one transaction); v4+ the
// broker-batched form (KIP-890 part 1: several transactions, VerifyOnly), which needs
// CLUSTER_ACTION on the cluster. v2+ answers PRODUCER_FENCED where older versions get
// INVALID_PRODUCER_EPOCH. v5 without VerifyOnly is a broker adding the partition of a
// KIP-890 part 2 produce: the transaction it starts runs under transaction version 2.
// TRANSACTION_ABORTABLE (v5) is never answered.

package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// addPartitionsToTxnClaim claims the versions this file's header lists.
func addPartitionsToTxnClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AddPartitionsToTxn, Min: 0, Max: 5, Handler: kernel.Typed(m.handleAddPartitionsToTxn)}
}

func (m *Module) handleAddPartitionsToTxn(ctx context.Context, req *kernel.Request, r *kmsg.AddPartitionsToTxnRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if r.Version < 4 {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = r.TransactionalID, r.ProducerID, r.ProducerEpoch
		for _, t := range r.Topics {
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = t.Topic, t.Partitions
			tx.Topics = append(tx.Topics, tt)
		}
		res := m.addPartitionsTxn(ctx, req, &tx)
		for _, t := range res.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, p.ErrorCode
				if rp.ErrorCode == kerr.ProducerFenced.Code && r.Version < 2 {
					rp.ErrorCode = kerr.InvalidProducerEpoch.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return kernel.Reply(resp), nil
	}
	if !req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return kernel.Reply(resp), nil
	}
	for i := range r.Transactions {
		resp.Transactions = append(resp.Transactions, m.addPartitionsTxn(ctx, req, &r.Transactions[i]))
	}
	return kernel.Reply(resp), nil
}

// addPartitionsTxn serves one transaction of the request: every partition gets the
// same code, except that authorization and unknown partitions are answered per
// partition with OPERATION_NOT_ATTEMPTED for the others, as Kafka.
func (m *Module) addPartitionsTxn(ctx context.Context, req *kernel.Request, tx *kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = tx.TransactionalID
	codes := map[kernel.TopicPartition]int16{}
	var order []kernel.TopicPartition
	for _, t := range tx.Topics {
		for _, p := range t.Partitions {
			tp := kernel.TopicPartition{Topic: t.Topic, Partition: p}
			if _, dup := codes[tp]; !dup {
				order = append(order, tp)
			}
			codes[tp] = 0
		}
	}
	all := func(e *kerr.Error) {
		for tp := range codes {
			codes[tp] = e.Code
		}
	}
	verify := tx.VerifyOnly && req.Version >= 4
	// As Kafka: v4+ comes from brokers, authorized by CLUSTER_ACTION on the whole
	// request; only the client form (v0-3) needs WRITE on the transactional id and
	// on each topic.
	fromClient := req.Version < 4
	switch {
	case fromClient && !req.Allowed(ctx, kernel.OpWrite, kernel.ResTransactionalID, tx.TransactionalID):
		all(kerr.TransactionalIDAuthorizationFailed)
	case tx.TransactionalID == "":
		all(kerr.InvalidRequest)
	default:
		m.addPartitions(ctx, req, tx, verify, fromClient, order, codes)
	}
	byTopic := map[string]int{}
	for _, tp := range order {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(out.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = tp.Topic
			out.Topics = append(out.Topics, rt)
		}
		rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		rp.Partition, rp.ErrorCode = tp.Partition, codes[tp]
		out.Topics[i].Partitions = append(out.Topics[i].Partitions, rp)
	}
	return out
}

func (m *Module) addPartitions(ctx context.Context, req *kernel.Request, tx *kmsg.AddPartitionsToTxnRequestTransaction, verify, fromClient bool, order []kernel.TopicPartition, codes map[kernel.TopicPartition]int16) {
	set := func(e *kerr.Error) {
		for _, tp := range order {
			codes[tp] = e.Code
		}
	}
	if !verify {
		im := m.meta.Image()
		failed := false
		allowed := map[string]bool{}
		for _, tp := range order {
			ok, seen := allowed[tp.Topic]
			if !seen {
				// As Kafka: a client may not add an internal topic, whatever its ACLs.
				ok = !fromClient || !isInternal(im, tp.Topic) && req.Allowed(ctx, kernel.OpWrite, kernel.ResTopic, tp.Topic)
				allowed[tp.Topic] = ok
			}
			switch {
			case !ok:
				codes[tp] = kerr.TopicAuthorizationFailed.Code
				failed = true
			case im.Partition(tp.Topic, tp.Partition) == nil:
				codes[tp] = kerr.UnknownTopicOrPartition.Code
				failed = true
			}
		}
		if failed {
			m.log.Debug("AddPartitionsToTxn refused", "transactional_id", tx.TransactionalID, "client_id", req.ClientID)
			for _, tp := range order {
				if codes[tp] == 0 {
					codes[tp] = kerr.OperationNotAttempted.Code
				}
			}
			return
		}
	}
	s, e := m.coordinatorFor(ctx, tx.TransactionalID)
	if e != nil {
		set(e)
		return
	}
	if verify {
		for _, tp := range order {
			if e := s.verify(tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tp); e != nil {
				codes[tp] = e.Code
			}
		}
		return
	}
	if len(order) == 0 {
		return
	}
	if e := s.retryConcurrent(ctx, func() *kerr.Error {
		return s.addPartitions(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, order, addTV(req.Version))
	}); e != nil {
		set(e)
	}
}

// addTV is the transaction version of partitions added by an AddPartitionsToTxn of
// version v, as Kafka: v5+ comes from a broker adding the partition of a KIP-890 part 2
// produce (or TxnOffsetCommit), older versions from clients and brokers before it.
func addTV(v int16) int16 {
	if v >= 5 {
		return 2
	}
	return 0
}

// isInternal reports whether topic is an internal topic (__consumer_offsets,
// __transaction_state).
func isInternal(im *kernel.Image, topic string) bool {
	t := im.Topic(topic)
	return t != nil && t.Internal
}
