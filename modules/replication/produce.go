package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// errAcksZeroFailed: a partition of an acks=0 produce failed. Kafka closes the
// connection so the producer notices and refreshes its metadata; so do we.
var errAcksZeroFailed = errors.New("replication: acks=0 produce failed; closing the connection")

// adminClientID may produce to internal topics (as in Kafka).
const adminClientID = "__admin_client"

// ackWait is a partition appended with acks=all, waiting for the HW to pass it.
type ackWait struct {
	p     *Partition
	last  int64
	epoch int32 // leader epoch of the append
	t, i  int   // index into the response
	done  bool
}

// produce serves one Produce request.
func (m *Module) produce(ctx context.Context, req *kernel.Request, r *kmsg.ProduceRequest) (kernel.Response, error) {
	v := req.Version
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, 0, len(r.Topics))
	im := m.meta.Image()
	acks := r.Acks
	validAcks := acks == 0 || acks == 1 || acks == -1
	// As Kafka: transactional batches need a transactional id the principal may write;
	// without one the whole request is refused (else any client could store
	// transactional batches around the transactional-id ACLs). A request of only
	// non-transactional batches is not checked against its transactional id.
	txnDenied := hasTransactionalBatch(r) &&
		(r.TransactionID == nil || !req.Allowed(ctx, kernel.OpWrite, kernel.ResTransactionalID, *r.TransactionID))
	budget := m.MaxProduceRecordsBytes
	var waits []ackWait
	failed := false
	// The transformer is loaded once per request: one registered or unset mid-request
	// applies from the next request.
	pc := produceCtx{ctx: ctx, m: m, version: v, now: m.now().UnixMilli(), txnID: r.TransactionID,
		transformer: m.transformer.get(), source: kernel.ProduceSource{Principal: req.Conn.Principal, ClientID: req.ClientID}}

	for tIdx := range r.Topics {
		t := &r.Topics[tIdx]
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		name := t.Topic
		var timg *kernel.TopicImage
		if v >= 13 {
			if timg = im.TopicByID(t.TopicID); timg != nil {
				name = timg.Name
			}
		} else {
			timg = im.Topic(name)
		}
		// Name-based requests are authorized before existence is revealed; ID-based
		// ones cannot be authorized until the ID is resolved.
		topicCode := int16(0)
		switch {
		case !validAcks:
			topicCode = kerr.InvalidRequiredAcks.Code
		case txnDenied:
			topicCode = kerr.TransactionalIDAuthorizationFailed.Code
		case v >= 13 && timg == nil:
			topicCode = kerr.UnknownTopicID.Code
		case !req.Allowed(ctx, kernel.OpWrite, kernel.ResTopic, name):
			topicCode = kerr.TopicAuthorizationFailed.Code
		case timg == nil:
			topicCode = kerr.UnknownTopicOrPartition.Code
		case timg.Internal && req.ClientID != adminClientID:
			topicCode = kerr.InvalidTopicException.Code
		}
		for pi := range t.Partitions {
			in := &t.Partitions[pi]
			out := &rt.Partitions[pi]
			out.Default()
			out.Partition = in.Partition
			if topicCode != 0 {
				out.ErrorCode = topicCode
				failed = true
				continue
			}
			tp := kernel.TopicPartition{Topic: name, Partition: in.Partition}
			p := pc.appendPartition(tp, im, timg.Internal, in.Records, acks, &budget, out)
			if out.ErrorCode != 0 {
				failed = true
				if out.ErrorCode == kerr.NotLeaderForPartition.Code && v >= 10 {
					m.addProduceLeader(resp, im, tp, out, req)
				}
				continue
			}
			if acks == -1 && p != nil { // nil: a transform dropped every record
				waits = append(waits, ackWait{p: p, last: pc.last, epoch: pc.epoch, t: len(resp.Topics), i: pi})
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}

	// producer_byte_rate: charged with the request's record bytes, as Kafka charges
	// the request's size, whatever became of each partition.
	var throttle time.Duration
	if m.quotas != nil {
		throttle = m.quotas.ProduceThrottle(kernel.QuotaClientOf(req), produceBytes(r), m.now())
	}
	switch acks {
	case 0:
		if failed {
			return kernel.Response{}, errAcksZeroFailed
		}
		return kernel.Response{NoResponse: true, Throttle: throttle}, nil
	case -1:
		if len(waits) > 0 {
			if err := m.waitAcks(ctx, resp, waits, time.Duration(r.TimeoutMillis)*time.Millisecond); err != nil {
				return kernel.Response{}, err
			}
		}
	}
	resp.ThrottleMillis = throttleMillis(throttle)
	return kernel.Reply(resp), nil
}

// produceBytes is the record bytes of a Produce request.
func produceBytes(r *kmsg.ProduceRequest) int64 {
	var n int64
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			n += int64(len(r.Topics[i].Partitions[j].Records))
		}
	}
	return n
}

// throttleMillis is a throttle time as throttle_time_ms.
func throttleMillis(d time.Duration) int32 {
	return int32(min(d, time.Hour).Milliseconds())
}

// produceCtx carries per-request state through appendPartition.
type produceCtx struct {
	ctx     context.Context // the request's; passed to the transformer
	m       *Module
	version int16
	now     int64 // ms
	last    int64 // last offset of the latest successful append
	epoch   int32 // leader epoch of the latest successful append
	decBuf  []byte
	// transformer is the registered kernel.ProduceTransformer (nil: none), loaded
	// once per request.
	transformer kernel.ProduceTransformer
	// source is who produced the request's records, for the transformer.
	source kernel.ProduceSource
	// txnID is the request's transactional id (nil: none).
	txnID *string

	// Set by validate for the records it checked: the number of batches, how many
	// carry a producer id (>= 0), the first batch's header, and the largest records
	// section after decompression (what recompress reserves for).
	batches, producerBatches int
	first                    recordbatch.Header
	maxUncompressed          int
}

// appendPartition validates and appends one partition's records, filling out. It
// returns the partition, or nil on error and when a produce transform dropped every
// record (nothing appended, nothing to wait for).
func (pc *produceCtx) appendPartition(tp kernel.TopicPartition, im *kernel.Image, internal bool, records []byte, acks int16, budget *int64, out *kmsg.ProduceResponseTopicPartition) *Partition {
	m := pc.m
	p, code := m.ledPartition(im, tp)
	if p == nil {
		out.ErrorCode = code
		return nil
	}
	// Below a free-space reserve client writes are refused before any work; the
	// guards log their state, not each refusal.
	if err := pc.admit(p, int64(len(records))); err != nil {
		out.ErrorCode = kerr.KafkaStorageError.Code
		pc.setMessage(out, err.Error())
		return nil
	}
	cfg := p.Config()
	size := int64(len(records))
	if size > *budget || size > cfg.SegmentBytes {
		out.ErrorCode = kerr.RecordListTooLarge.Code
		pc.setMessage(out, fmt.Sprintf("records of %d bytes exceed the request or segment bound", size))
		return nil
	}
	*budget -= size
	if code, msg := pc.validate(tp, records, cfg, out); code != 0 {
		out.ErrorCode = code
		pc.setMessage(out, msg)
		return nil
	}
	// An idempotent or transactional producer's records: one batch with a base
	// sequence, as Kafka requires (the sequence check is per batch and a retry must
	// map to one entry of the producer's state).
	producer := pc.producerBatches > 0
	var in recordbatch.Header
	var seq kernel.SeqRange
	if producer {
		in = pc.first
		if code, msg := pc.checkProducerBatch(tp, p); code != 0 {
			out.ErrorCode = code
			pc.setMessage(out, msg)
			return nil
		}
		seq = seqRange(&in)
	}
	// The Bound check (an interface call) runs only when a transformer is registered,
	// so the path without one is unchanged.
	if pc.transformer != nil && !internal && pc.transformer.Bound(tp.Topic) {
		var ok bool
		if records, ok = pc.transform(tp, p, cfg, records, out); !ok {
			return nil
		}
		if producer && len(records) > 0 && !sameProducerBatch(pc, &in) {
			out.ErrorCode = kerr.UnknownServerError.Code
			pc.setMessage(out, "produce transform changed the producer fields or the batch count of an idempotent batch")
			m.log.Error("produce transform broke an idempotent batch", "topic", tp.Topic, "partition", tp.Partition, "producer_id", in.ProducerID)
			return nil
		}
		if len(records) == 0 {
			if producer {
				// Every record dropped: the producer's sequence still moves on, so
				// its next batch is in order and a retry of this one is a duplicate.
				pc.appendDropped(tp, p, seq, acks, out)
			}
			return nil
		}
	}
	if records, code = pc.recompress(records, cfg, out); code != 0 {
		out.ErrorCode = code
		return nil
	}
	var res kernel.AppendResult
	var err error
	if producer {
		// The input's range, also for a transform's output whose record count
		// changed: a retry of the input must be recognised (see doc.go).
		res, pc.epoch, err = p.appendProducer(records, seq, acks == -1)
	} else {
		res, pc.epoch, err = p.appendLeader(records, acks == -1)
	}
	if err != nil {
		out.ErrorCode = m.storageCode(p, tp, "append", err)
		if out.ErrorCode != kerr.KafkaStorageError.Code && producer && m.log.Enabled(pc.ctxOrBackground(), slog.LevelDebug) {
			m.log.Debug("producer batch rejected", "topic", tp.Topic, "partition", tp.Partition, "producer_id", in.ProducerID, "epoch", in.ProducerEpoch, "base_sequence", in.BaseSequence, "err", err)
		}
		return nil
	}
	out.BaseOffset = res.BaseOffset
	out.LogStartOffset = res.LogStartOffset
	pc.last = res.LastOffset
	if res.Duplicate {
		// Answered with the original append (acks=all still waits for the HW to pass
		// its last offset); nothing was stored.
		out.LogStartOffset = p.log.LogStartOffset()
		if cfg.MessageTimestampType == "LogAppendTime" {
			out.LogAppendTime = res.LogAppendTime
		}
		return p
	}
	m.produceBytes.Add(int64(len(records))) // the stored bytes (a transform's output)
	p.stats.in(int64(len(records)), res.LastOffset-res.BaseOffset+1)
	if cfg.MessageTimestampType == "LogAppendTime" {
		out.LogAppendTime = pc.now
	}
	return p
}

// ctxOrBackground is the request's context (Background for kernel.Partitions appends,
// which have none in produceCtx).
func (pc *produceCtx) ctxOrBackground() context.Context {
	if pc.ctx == nil {
		return context.Background()
	}
	return pc.ctx
}

// checkProducerBatch checks the records of a producer (validate found a producer id):
// exactly one batch, a base sequence >= 0, and for the first transactional batch of
// a transaction in this partition, that the coordinator added the partition to it
// (KIP-890 part 1), or, from Produce v12 on, has the coordinator add it (part 2: the
// client no longer sends AddPartitionsToTxn). It returns a Kafka code and message, or
// 0.
func (pc *produceCtx) checkProducerBatch(tp kernel.TopicPartition, p *Partition) (int16, string) {
	h := &pc.first
	switch {
	case pc.batches != 1:
		return kerr.InvalidRecord.Code, fmt.Sprintf("an idempotent or transactional producer must send one record batch per partition, got %d", pc.batches)
	case h.ProducerID < 0:
		return kerr.InvalidRecord.Code, "producer id missing"
	case h.BaseSequence < 0:
		return kerr.InvalidRecord.Code, fmt.Sprintf("idempotent batch with base sequence %d", h.BaseSequence)
	case !h.IsTransactional() || pc.txnID == nil:
		// (A transactional batch without a transactional id was refused already.)
		return 0, ""
	}
	if st, ok := p.log.Producer(h.ProducerID); ok && st.TxnStartOffset >= 0 && st.Epoch == h.ProducerEpoch {
		// The producer's transaction is already open in this partition. (One at
		// another epoch is not this batch's: with transaction version 2 the next
		// transaction's first batch may come before the previous one's marker, and
		// the coordinator answers it CONCURRENT_TRANSACTIONS until the marker is in.)
		return 0, ""
	}
	v := pc.m.txnVerifier()
	if v == nil {
		return 0, ""
	}
	add := pc.version >= 12
	err := v.VerifyTxnPartition(pc.ctxOrBackground(), *pc.txnID, h.ProducerID, h.ProducerEpoch, tp, add)
	if err == nil || (!add && errors.Is(err, kernel.ErrNotCoordinator)) {
		return 0, ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable, kerr.NotCoordinator:
			// As Kafka: codes a producer does not expect from Produce become the
			// retriable NOT_ENOUGH_REPLICAS; the producer retries after its backoff.
			return kerr.NotEnoughReplicas.Code, "transaction verification: " + err.Error()
		}
		return ke.Code, err.Error()
	}
	// A verification that could not complete (no coordinator, cancelled): as Kafka,
	// a retriable code the producer retries.
	pc.m.log.Warn("verify transaction partition", "topic", tp.Topic, "partition", tp.Partition, "producer_id", h.ProducerID, "err", err)
	return kerr.NotEnoughReplicas.Code, "transaction verification failed: " + err.Error()
}

// appendDropped records the sequence range of an idempotent batch whose records a
// produce transform all dropped; out already holds the answer for the drop (base
// offset = log end), a duplicate answers the original's.
func (pc *produceCtx) appendDropped(tp kernel.TopicPartition, p *Partition, seq kernel.SeqRange, acks int16, out *kmsg.ProduceResponseTopicPartition) {
	res, _, err := p.appendProducer(nil, seq, acks == -1)
	if err != nil {
		out.ErrorCode = pc.m.storageCode(p, tp, "append", err)
		out.BaseOffset, out.LogStartOffset = -1, -1
		return
	}
	if res.Duplicate {
		out.BaseOffset = res.BaseOffset
	}
}

// seqRange is the sequence range of a producer batch: base sequence .. base +
// LastOffsetDelta, wrapping past MaxInt32 to 0 as Kafka's sequences do.
func seqRange(h *recordbatch.Header) kernel.SeqRange {
	first, delta := h.BaseSequence, h.LastOffsetDelta
	last := first + delta // may overflow; fixed below
	if delta > 0 && first > math.MaxInt32-delta {
		last = delta - (math.MaxInt32 - first) - 1
	}
	return kernel.SeqRange{First: first, Last: last, ProducerID: h.ProducerID, Epoch: h.ProducerEpoch}
}

// sameProducerBatch reports whether a transform's output (just validated into pc)
// is one batch with the input's producer id, epoch, base sequence and transactional
// flag, as kernel.ProduceTransformer requires.
func sameProducerBatch(pc *produceCtx, in *recordbatch.Header) bool {
	o := &pc.first
	return pc.batches == 1 && o.ProducerID == in.ProducerID && o.ProducerEpoch == in.ProducerEpoch &&
		o.BaseSequence == in.BaseSequence && o.IsTransactional() == in.IsTransactional()
}

// transform runs the registered ProduceTransformer over one partition's validated
// records and validates its output like produced input (max.message.bytes, framing,
// timestamps, LogAppendTime stamping), so what is stored obeys the topic's limits. It
// returns the records to append and true, or false with out's error set. An empty
// result with true means the transform dropped every record: nothing is appended and
// the partition answers success with BaseOffset = the current log end offset (the
// offset the next record will get). Kafka has no notion of a produce whose records
// were all filtered; the log end offset is the closest truthful answer (no offset was
// assigned, none is skipped) and keeps a producer's "base offset never decreases"
// view intact.
func (pc *produceCtx) transform(tp kernel.TopicPartition, p *Partition, cfg *kconfig.Topic, records []byte, out *kmsg.ProduceResponseTopicPartition) ([]byte, bool) {
	ctx := pc.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := pc.transformer.TransformProduce(ctx, tp, pc.source, records)
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			out.ErrorCode = ke.Code
			pc.setMessage(out, err.Error())
		} else {
			out.ErrorCode = kerr.UnknownServerError.Code
			pc.setMessage(out, "produce transform failed")
			pc.m.log.Error("produce transform", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
		return nil, false
	}
	if len(res) == 0 {
		out.BaseOffset = p.log.LogEndOffset()
		out.LogStartOffset = p.log.LogStartOffset()
		return nil, true
	}
	if int64(len(res)) > cfg.SegmentBytes {
		out.ErrorCode = kerr.RecordListTooLarge.Code
		pc.setMessage(out, fmt.Sprintf("transformed records of %d bytes exceed segment.bytes", len(res)))
		return nil, false
	}
	if code, msg := pc.validate(tp, res, cfg, out); code != 0 {
		out.ErrorCode = code
		pc.setMessage(out, "transformed records: "+msg)
		return nil, false
	}
	return res, true
}

// admit is the free-space check of a client write of n bytes to p: the data dir's
// reserve (kernel/diskguard), then p's own log dir's (log.dirs on several disks).
func (pc *produceCtx) admit(p *Partition, n int64) error {
	if err := pc.m.broker.AdmitWrite(n); err != nil {
		return err
	}
	return p.admitWrite(n)
}

// recompress rewrites records into the topic's compression.type, when it names a
// codec (not producer), as Kafka's broker does: batches in another codec are rebuilt
// at the topic's compression.*.level, producer fields, timestamps and record deltas
// kept. The rewritten batches must still fit max.message.bytes (MESSAGE_TOO_LARGE)
// and segment.bytes (RECORD_LIST_TOO_LARGE), checked as Kafka does after the
// recompression. The work draws on the broker's decompression budget
// (queued.max.decompressed.bytes) as validation does: one batch's records decoded
// and rebuilt (twice the largest section validate measured, which also bounds the
// decoder) and the output (the input's size), waiting for room as validation does.
func (pc *produceCtx) recompress(records []byte, cfg *kconfig.Topic, out *kmsg.ProduceResponseTopicPartition) ([]byte, int16) {
	codec, level := -1, 0
	switch cfg.CompressionType {
	case "uncompressed":
		codec = recordbatch.CodecNone
	case "gzip":
		codec, level = recordbatch.CodecGzip, int(cfg.CompressionGzipLevel)
		if level < 0 {
			level = 0
		}
	case "snappy":
		codec = recordbatch.CodecSnappy
	case "lz4":
		codec, level = recordbatch.CodecLZ4, int(cfg.CompressionLz4Level)
	case "zstd":
		codec, level = recordbatch.CodecZstd, int(cfg.CompressionZstdLevel)
	}
	if codec < 0 {
		return records, 0
	}
	if !recordbatch.NeedsRecompress(records, codec) {
		return records, 0
	}
	if b := pc.m.dbudget.Load(); b != nil {
		ctx := pc.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		release, err := b.Reserve(ctx, 2*int64(pc.maxUncompressed)+int64(len(records)))
		if err != nil {
			pc.setMessage(out, "recompress to "+cfg.CompressionType+": "+err.Error())
			return nil, batchErrorCode(err)
		}
		defer release()
	}
	rc, _ := pc.m.recompressors.Get().(*recordbatch.Recompressor)
	if rc == nil {
		rc = new(recordbatch.Recompressor)
	}
	res, err := rc.Recompress(records, codec, level, pc.maxUncompressed+1)
	pc.m.recompressors.Put(rc)
	if err != nil {
		pc.setMessage(out, "recompress to "+cfg.CompressionType+": "+err.Error())
		return nil, batchErrorCode(err)
	}
	if int64(len(res)) > cfg.SegmentBytes {
		pc.setMessage(out, fmt.Sprintf("records recompressed to %s are %d bytes, over segment.bytes", cfg.CompressionType, len(res)))
		return nil, kerr.RecordListTooLarge.Code
	}
	if &res[0] != &records[0] { // rebuilt: the batches' sizes changed
		code := int16(0)
		_ = recordbatch.Split(res, func(_ recordbatch.Header, batch []byte) error {
			if int64(len(batch)) > cfg.MaxMessageBytes {
				pc.setMessage(out, fmt.Sprintf("a batch recompressed to %s is %d bytes, max.message.bytes is %d", cfg.CompressionType, len(batch), cfg.MaxMessageBytes))
				code = kerr.MessageTooLarge.Code
				return errStopSplit
			}
			return nil
		})
		if code != 0 {
			return nil, code
		}
	}
	return res, 0
}

func (pc *produceCtx) setMessage(out *kmsg.ProduceResponseTopicPartition, msg string) {
	if pc.version >= 8 && msg != "" {
		out.ErrorMessage = &msg
	}
}

// validate checks every batch of records for tp and prepares it for the append
// (LogAppendTime stamping). It returns a Kafka error code and message, or 0.
func (pc *produceCtx) validate(tp kernel.TopicPartition, records []byte, cfg *kconfig.Topic, out *kmsg.ProduceResponseTopicPartition) (int16, string) {
	if len(records) == 0 {
		return kerr.InvalidRecord.Code, "produce request has no record batch"
	}
	logAppend := cfg.MessageTimestampType == "LogAppendTime"
	compact := cfg.Compact()
	code, msg := int16(0), ""
	idx := 0
	pc.batches, pc.producerBatches, pc.maxUncompressed = 0, 0, 0
	err := recordbatch.Split(records, func(h recordbatch.Header, batch []byte) error {
		defer func() { idx++ }()
		if pc.batches == 0 {
			pc.first = h
		}
		pc.batches++
		if h.ProducerID >= 0 {
			pc.producerBatches++
		}
		if int64(len(batch)) > cfg.MaxMessageBytes {
			code, msg = kerr.MessageTooLarge.Code, fmt.Sprintf("batch %d is %d bytes, max.message.bytes is %d", idx, len(batch), cfg.MaxMessageBytes)
			return errStopSplit
		}
		info, err := pc.validateBatch(&h, batch)
		if err != nil {
			code, msg = batchErrorCode(err), fmt.Sprintf("batch %d: %v", idx, err)
			return errStopSplit
		}
		pc.maxUncompressed = max(pc.maxUncompressed, info.UncompressedBytes)
		switch {
		case h.IsControl():
			code, msg = kerr.InvalidRecord.Code, "control batches may not be produced by clients"
			return errStopSplit
		case h.Codec() == recordbatch.CodecZstd && pc.version < 7:
			code, msg = kerr.UnsupportedCompressionType.Code, "zstd needs produce v7+"
			return errStopSplit
		}
		// Validate counted the null keys on its one pass over the records (decompressed
		// if need be); only a refused batch is decoded again, to list them.
		if compact && info.NullKeys > 0 {
			code, msg = kerr.InvalidRecord.Code, pc.keylessErrors(tp, batch, out)
			return errStopSplit
		}
		if logAppend {
			return recordbatch.SetLogAppendTime(batch, pc.now)
		}
		if lo, hi := pc.timestampBounds(cfg); info.Records > 0 && (info.MinTimestamp < lo || info.MaxTimestamp > hi) {
			// The batch's range is out of bounds; records without a timestamp (-1)
			// are exempt, as in Kafka, so look at each record (error path only).
			if n := pc.timestampErrors(batch, lo, hi, out); n > 0 {
				code, msg = kerr.InvalidTimestamp.Code, fmt.Sprintf("batch %d has %d records with timestamps outside [%d, %d]", idx, n, lo, hi)
				return errStopSplit
			}
		}
		// As Kafka, the stored max timestamp is the records' (CreateTime): retention,
		// the time index and segment.ms trust the header, so a client's wrong value
		// would keep a segment forever or delete fresh records at once.
		if info.Records > 0 && (h.MaxTimestamp != info.MaxTimestamp || h.Attributes&recordbatch.AttrLogAppendTime != 0) {
			binary.BigEndian.PutUint64(batch[recordbatch.OffMaxTimestamp:], uint64(info.MaxTimestamp))
			attrs := binary.BigEndian.Uint16(batch[recordbatch.OffAttributes:]) &^ recordbatch.AttrLogAppendTime
			binary.BigEndian.PutUint16(batch[recordbatch.OffAttributes:], attrs)
			recordbatch.SetCRC(batch)
		}
		return nil
	})
	if code != 0 {
		return code, msg
	}
	if err != nil {
		return batchErrorCode(err), err.Error()
	}
	return 0, ""
}

// hasTransactionalBatch reports whether any batch in the request has the transactional
// attribute. It reads batch headers only, walking by their lengths, and stops at a
// malformed one (validation reports that later).
func hasTransactionalBatch(r *kmsg.ProduceRequest) bool {
	for i := range r.Topics {
		for j := range r.Topics[i].Partitions {
			for b := r.Topics[i].Partitions[j].Records; len(b) >= recordbatch.HeaderSize; {
				if binary.BigEndian.Uint16(b[recordbatch.OffAttributes:])&recordbatch.AttrTransactional != 0 {
					return true
				}
				n := int64(int32(binary.BigEndian.Uint32(b[recordbatch.OffBatchLength:]))) + recordbatch.LogOverhead
				if n < recordbatch.HeaderSize || n > int64(len(b)) {
					break
				}
				b = b[n:]
			}
		}
	}
	return false
}

// validateBatch validates one batch, its decompressed output reserved from the
// broker-wide budget (queued.max.decompressed.bytes), waiting for room with the
// request's context, at most recordbatch.DefaultDecompressWait (then
// REQUEST_TIMED_OUT, retriable).
func (pc *produceCtx) validateBatch(h *recordbatch.Header, batch []byte) (recordbatch.Info, error) {
	b := pc.m.dbudget.Load()
	if b == nil || h.Codec() == recordbatch.CodecNone {
		return recordbatch.Validate(batch)
	}
	ctx := pc.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return recordbatch.ValidateBudget(ctx, batch, b)
}

// errStopSplit stops recordbatch.Split after a batch failed validation.
var errStopSplit = errors.New("stop")

// batchErrorCode maps a recordbatch error as Kafka does: a magic other than 2 (the
// produce v3+ check) and records that disagree with the header or do not decode (count,
// offset deltas, framing: Kafka's InvalidRecordException) are INVALID_RECORD; bad CRCs,
// lengths and compression are CORRUPT_MESSAGE. The difference matters to clients:
// CORRUPT_MESSAGE is retriable, so a producer would resend a malformed batch until its
// delivery timeout instead of failing it at once.
func batchErrorCode(err error) int16 {
	if errors.Is(err, recordbatch.ErrBudget) {
		// No room in the decompression budget in time: the batch is fine, retry.
		return kerr.RequestTimedOut.Code
	}
	if errors.Is(err, recordbatch.ErrMagic) || errors.Is(err, recordbatch.ErrRecords) {
		return kerr.InvalidRecord.Code
	}
	return kerr.CorruptMessage.Code
}

// timestampBounds returns the accepted CreateTime range [now-before, now+after],
// saturating instead of overflowing.
func (pc *produceCtx) timestampBounds(cfg *kconfig.Topic) (lo, hi int64) {
	lo, hi = math.MinInt64, math.MaxInt64
	if b := cfg.MessageTimestampBeforeMaxMs; b >= 0 && b < math.MaxInt64 && pc.now >= 0 {
		lo = pc.now - b
	}
	if a := cfg.MessageTimestampAfterMaxMs; a >= 0 && a < math.MaxInt64-pc.now {
		hi = pc.now + a
	}
	return lo, hi
}

// timestampErrors counts the records whose timestamps are out of range (-1, no
// timestamp, is exempt) and lists them as record errors (KIP-467, v8+). Only on the
// error path.
func (pc *produceCtx) timestampErrors(batch []byte, lo, hi int64, out *kmsg.ProduceResponseTopicPartition) int {
	n := 0
	pc.decBuf, _ = recordbatch.Records(batch, pc.decBuf, func(r *recordbatch.Record) error {
		if r.Timestamp == noTimestamp || (r.Timestamp >= lo && r.Timestamp <= hi) {
			return nil
		}
		n++
		if pc.version >= 8 {
			e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			e.RelativeOffset = r.OffsetDelta
			msg := fmt.Sprintf("timestamp %d out of range", r.Timestamp)
			e.ErrorMessage = &msg
			out.ErrorRecords = append(out.ErrorRecords, e)
		}
		return nil
	})
	return n
}

// keylessErrors lists the records of batch without a key as record errors (KIP-467,
// v8+; the batch index is the record's offset delta, as in Kafka) and returns Kafka's
// message for a compacted topic's refusal. Only on the error path.
func (pc *produceCtx) keylessErrors(tp kernel.TopicPartition, batch []byte, out *kmsg.ProduceResponseTopicPartition) string {
	msg := fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s.", tp)
	if pc.version < 8 {
		return msg
	}
	pc.decBuf, _ = recordbatch.Records(batch, pc.decBuf, func(r *recordbatch.Record) error {
		if r.Key == nil {
			e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			e.RelativeOffset = r.OffsetDelta
			e.ErrorMessage = &msg
			out.ErrorRecords = append(out.ErrorRecords, e)
		}
		return nil
	})
	return msg
}

// noTimestamp is a record timestamp of "none" (Kafka's RecordBatch.NO_TIMESTAMP).
const noTimestamp = -1

// waitAcks parks an acks=all produce in the purgatory until the HW passes every
// appended partition's last offset (at once with ISR = {self}), the ISR shrinks below
// min.insync.replicas, or the request times out.
func (m *Module) waitAcks(ctx context.Context, resp *kmsg.ProduceResponse, waits []ackWait, timeout time.Duration) error {
	keys := make([]kernel.TopicPartition, len(waits))
	for i := range waits {
		keys[i] = waits[i].p.tp
	}
	try := func() bool {
		all := true
		for i := range waits {
			w := &waits[i]
			if w.done {
				continue
			}
			out := &resp.Topics[w.t].Partitions[w.i]
			// As Kafka: once the HW passes the batch, the write is acknowledged if the
			// maximal ISR is still at least min.insync.replicas, else
			// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the data stays; the producer may retry
			// and duplicate). A deleted partition answers UNKNOWN_TOPIC_OR_PARTITION at
			// once; a lost leadership (or a new leader epoch, whose truncation may
			// remove the batch) NOT_LEADER_OR_FOLLOWER.
			done, err := w.p.ackState(w.last, w.epoch)
			if !done {
				all = false
				continue
			}
			w.done = true
			out.ErrorCode = errorCode(err)
		}
		return all
	}
	waitStart := time.Now()
	done, err := m.pg.wait(ctx, keys, timeout, try)
	kernel.NoteWait(ctx, time.Since(waitStart)) // replication's time, not this client's
	if err != nil && !errors.Is(err, errStopped) {
		return err
	}
	if !done {
		for i := range waits {
			if !waits[i].done {
				resp.Topics[waits[i].t].Partitions[waits[i].i].ErrorCode = kerr.RequestTimedOut.Code
			}
		}
	}
	return nil
}

// addProduceLeader fills the current-leader tag and the leader's endpoint (v10+) for a
// NOT_LEADER_OR_FOLLOWER partition, so the client can redirect without a metadata
// round trip.
func (m *Module) addProduceLeader(resp *kmsg.ProduceResponse, im *kernel.Image, tp kernel.TopicPartition, out *kmsg.ProduceResponseTopicPartition, req *kernel.Request) {
	pi := im.Partition(tp.Topic, tp.Partition)
	if pi == nil || pi.Leader < 0 {
		return
	}
	out.CurrentLeader.LeaderID, out.CurrentLeader.LeaderEpoch = pi.Leader, pi.LeaderEpoch
	for _, b := range resp.Brokers {
		if b.NodeID == pi.Leader {
			return
		}
	}
	for _, ep := range m.addEndpoint(nil, im, pi.Leader, req) {
		b := kmsg.NewProduceResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = ep.nodeID, ep.host, ep.port, ep.rack
		resp.Brokers = append(resp.Brokers, b)
	}
}
