package transforms

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/transforms/wasm"
)

// PositionNamespace holds derived transforms' positions: key "<name>/<partition>",
// value the next input offset to transform (int64 big-endian).
const PositionNamespace = "transforms.pos"

// derived runs a derived transform: for every input partition this broker leads, a
// worker reads the input as a read_committed consumer (ReadStable) from its position,
// transforms it and appends the outputs to the output topics (partition = input
// partition modulo the output's partition count, so per-partition order is kept),
// then advances the position. Exactly once when eos (derived_eos.go: outputs and
// position in one transaction); otherwise at least once (work, below): a crash
// between an output append and the position write repeats those records.
type derived struct {
	t      *transform
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	workers   map[int32]context.CancelFunc
	positions map[int32]int64 // next input offset per led partition, for status
	eos       bool            // workers are exactly once
}

// pollInterval is how often a caught-up worker looks for new records and the
// supervisor for partition leadership changes.
const pollInterval = 100 * time.Millisecond

// positionEvery bounds how often a worker stores its position.
const positionEvery = time.Second

func (t *transform) startDerived() {
	ctx, cancel := context.WithCancel(context.Background())
	d := &derived{t: t, ctx: ctx, cancel: cancel, workers: map[int32]context.CancelFunc{},
		positions: map[int32]int64{}, eos: t.m.eos.enabled()}
	t.derived = d
	d.wg.Add(1)
	go d.supervise()
}

func (d *derived) stop() {
	d.cancel()
	d.wg.Wait()
}

// supervise starts a worker for each led input partition and stops the ones no longer
// led.
func (d *derived) supervise() {
	defer d.wg.Done()
	tick := time.NewTicker(pollInterval * 5)
	defer tick.Stop()
	for {
		ti := d.t.m.meta.Image().Topic(d.t.dep.Input)
		led := map[int32]bool{}
		if ti != nil {
			for p := range ti.Partitions {
				tp := kernel.TopicPartition{Topic: d.t.dep.Input, Partition: int32(p)}
				if _, ok := d.t.m.parts.Leader(tp); ok {
					led[int32(p)] = true
				}
			}
		}
		d.mu.Lock()
		for p, stop := range d.workers {
			if !led[p] {
				stop()
				delete(d.workers, p)
				delete(d.positions, p)
			}
		}
		for p := range led {
			if d.workers[p] == nil {
				wctx, stop := context.WithCancel(d.ctx)
				d.workers[p] = stop
				d.wg.Add(1)
				if d.eos {
					go d.workEOS(wctx, p)
				} else {
					go d.work(wctx, p)
				}
			}
		}
		d.mu.Unlock()
		select {
		case <-d.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// setPosition records p's committed (durably stored) position for status.
func (d *derived) setPosition(p int32, pos int64) {
	d.mu.Lock()
	if d.workers[p] != nil {
		d.positions[p] = pos
	}
	d.mu.Unlock()
}

// status reports whether the workers are exactly once and their committed positions.
func (d *derived) status() (exactlyOnce bool, positions map[int32]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.positions) > 0 {
		positions = maps.Clone(d.positions)
	}
	return d.eos, positions
}

func (d *derived) posKey(p int32) string { return d.t.dep.Name + "/" + strconv.Itoa(int(p)) }

func (d *derived) work(ctx context.Context, p int32) {
	defer d.wg.Done()
	t := d.t
	log := t.m.log.With("transform", t.dep.Name, "partition", p)
	pos := int64(0)
	if v := t.m.meta.Image().Extension(PositionNamespace, d.posKey(p)); len(v) == 8 {
		pos = int64(binary.BigEndian.Uint64(v))
	}
	saved, lastSave := pos, time.Now()
	d.setPosition(p, pos)
	save := func(force bool) {
		if pos == saved || (!force && time.Since(lastSave) < positionEvery) {
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.m.ext.PutExtension(sctx, PositionNamespace, d.posKey(p), binary.BigEndian.AppendUint64(nil, uint64(pos))); err != nil {
			log.Warn("storing the derived transform's position failed", "err", err)
			return
		}
		saved, lastSave = pos, time.Now()
		d.setPosition(p, pos)
	}
	defer save(true)
	tp := kernel.TopicPartition{Topic: t.dep.Input, Partition: p}
	dec := recordbatch.Decoder{Compacted: true} // the input may be a compacted topic
	backoff := pollInterval
	for ctx.Err() == nil {
		end, err := t.m.parts.ReadStable(ctx, tp, pos, func(batch []byte) error {
			h, sec, err := dec.Section(batch)
			if err != nil {
				return err
			}
			if h.LastOffset() < pos {
				return nil
			}
			if !h.IsControl() {
				if err := d.transformBatch(ctx, tp, h, sec, batch); err != nil {
					return err
				}
			}
			pos = h.LastOffset() + 1
			save(false)
			return nil
		})
		if err == nil && end > pos {
			pos = end // past trailing markers and aborted batches
		}
		save(false)
		if err != nil && ctx.Err() == nil {
			if !errors.Is(err, kernel.ErrNotLeader) {
				log.Warn("derived transform stalled; retrying", "err", err, "position", pos, "retry_in", backoff)
			}
			backoff = min(2*backoff, 10*time.Second)
		} else {
			backoff = pollInterval
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

// transformBatch transforms one input batch and appends its outputs. An error stops
// the worker at this batch (it is retried); policies drop or dead-letter failed
// batches instead.
func (d *derived) transformBatch(ctx context.Context, tp kernel.TopicPartition, h recordbatch.Header, sec, batch []byte) error {
	t := d.t
	perOut, err := d.outputs(ctx, tp, h, sec, batch)
	if err != nil || perOut == nil {
		return err
	}
	im := t.m.meta.Image()
	for i, recs := range perOut {
		if len(recs) == 0 {
			continue
		}
		otp, err := d.outputPartition(im, i, tp.Partition)
		if err != nil {
			return err
		}
		out := recordbatch.Build(recordbatch.Options{Codec: h.Codec(), BaseTimestamp: h.BaseTimestamp, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs...)
		if _, err := t.m.parts.Append(ctx, otp, out); err != nil {
			return err
		}
	}
	return nil
}

// outputPartition is output i's partition for input partition p: p modulo the
// output's partition count, so per-partition order is kept.
func (d *derived) outputPartition(im *kernel.Image, i int, p int32) (kernel.TopicPartition, error) {
	ot := im.Topic(d.t.dep.Outputs[i])
	if ot == nil || len(ot.Partitions) == 0 {
		return kernel.TopicPartition{}, errors.New("output topic " + d.t.dep.Outputs[i] + " does not exist")
	}
	return kernel.TopicPartition{Topic: ot.Name, Partition: p % int32(len(ot.Partitions))}, nil
}

// outputs transforms one input batch into records per output (indexed as
// dep.Outputs; timestamp deltas from h.BaseTimestamp). It returns nil, nil when the
// transform failed and the policy dropped or dead-lettered the batch, and the error
// under the reject policy (the batch is retried later).
func (d *derived) outputs(ctx context.Context, tp kernel.TopicPartition, h recordbatch.Header, sec, batch []byte) ([][]recordbatch.Record, error) {
	t := d.t
	wb := &wasm.Batch{
		Topic: tp.Topic, Partition: tp.Partition,
		BaseOffset: h.BaseOffset, BaseTimestamp: h.BaseTimestamp, MaxTimestamp: h.MaxTimestamp,
		Attributes: h.Attributes, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
		BaseSequence: h.BaseSequence, RecordCount: h.RecordCount, Records: sec,
	}
	outs, err := t.run(ctx, wb)
	if err != nil {
		switch t.dep.Policy {
		case PolicyDrop:
			t.dropped.Add(int64(h.RecordCount))
			return nil, nil
		case PolicyDLQ:
			if derr := t.writeDLQ(ctx, tp, batch, err); derr != nil {
				return nil, derr
			}
			t.dlq.Add(int64(h.RecordCount))
			return nil, nil
		}
		return nil, err // reject: retry this batch later
	}
	perOut := make([][]recordbatch.Record, len(t.dep.Outputs))
	for i := range outs {
		o := &outs[i]
		if o.Index < 0 || o.Index >= len(perOut) {
			continue
		}
		r := recordbatch.Record{Key: o.Key, Value: o.Value, TimestampDelta: o.TimestampDelta}
		for _, hd := range o.Headers {
			r.Headers = append(r.Headers, recordbatch.RecordHeader{Key: []byte(hd.Key), Value: hd.Value})
		}
		perOut[o.Index] = append(perOut[o.Index], r)
	}
	return perOut, nil
}
