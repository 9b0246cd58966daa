package transforms

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/transforms/wasm"
)

// transform is one running deployment.
type transform struct {
	m    *Module
	dep  Deployment
	prog *wasm.Program
	pool *wasm.Pool

	recordsIn, recordsOut, batches, failures, dropped, dlq atomic.Int64
	latencyNs                                              atomic.Int64 // last batch
	latencyEWMA                                            atomic.Int64 // ns, alpha 1/8

	mu          sync.Mutex
	failed      error     // could not compile or start: every batch fails
	lastErr     string    // last batch failure
	consecutive int       // failed batches in a row
	pausedUntil time.Time // breaker
	pause       time.Duration
	pauses      int

	derived *derived // derived mode worker, nil inline

	decoders sync.Pool // *recordbatch.Decoder
	builders sync.Pool // *recordbatch.Builder
}

func newTransform(m *Module, d *Deployment) *transform {
	t := &transform{m: m, dep: *d}
	t.decoders.New = func() any { return new(recordbatch.Decoder) }
	t.builders.New = func() any { b, _ := recordbatch.NewBuilder(recordbatch.Options{}); return b }
	return t
}

func (t *transform) sameSettings(d *Deployment) bool {
	a, b := t.dep, *d
	return a.Input == b.Input && slices.Equal(a.Outputs, b.Outputs) && a.Mode == b.Mode &&
		a.Policy == b.Policy && a.DLQTopic == b.DLQTopic && a.MemoryLimitPages == b.MemoryLimitPages &&
		a.TimeoutMs == b.TimeoutMs && maps.Equal(a.Env, b.Env) && a.DeployedAtMs == b.DeployedAtMs
}

func (t *transform) open(bin []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pages := t.dep.MemoryLimitPages
	if pages == 0 {
		pages = t.m.MemoryLimitPages
	}
	prog, err := t.m.engine.Compile(ctx, bin, pages)
	if err != nil {
		return err
	}
	timeout := time.Duration(t.dep.TimeoutMs) * time.Millisecond
	if timeout == 0 {
		timeout = time.Duration(t.m.TimeoutMs) * time.Millisecond
	}
	pool, err := prog.NewPool(ctx, wasm.Config{
		Name:         t.dep.Name,
		InputTopic:   t.dep.Input,
		OutputTopics: t.dep.Outputs,
		Timeout:      timeout,
		Instances:    t.m.Instances,
		Env:          t.dep.Env,
		Log:          t.m.log.With("transform", t.dep.Name),
	})
	if err != nil {
		_ = prog.Close(ctx)
		return err
	}
	t.prog, t.pool = prog, pool
	return nil
}

func (t *transform) setFailed(err error) {
	t.mu.Lock()
	t.failed = err
	t.lastErr = err.Error()
	t.mu.Unlock()
}

func (t *transform) close(ctx context.Context) {
	if t.derived != nil {
		t.derived.stop()
	}
	if t.pool != nil {
		_ = t.pool.Close(ctx)
	}
	if t.prog != nil {
		_ = t.prog.Close(ctx)
	}
}

// errPaused is a batch refused because the breaker paused the transform.
var errPaused = errors.New("transform paused after repeated failures")

// run transforms one batch, keeping stats and the breaker.
func (t *transform) run(ctx context.Context, b *wasm.Batch) ([]wasm.Output, error) {
	var outs []wasm.Output
	err := t.runFunc(ctx, b, false, func(o []wasm.Output) error { outs = o; return nil })
	return outs, err
}

// runFunc runs one batch and calls fn with its outputs; with keep they are valid only
// during fn (wasm.Pool.TransformFunc: the instance reuses their memory), otherwise fn
// may keep them. fn's error is returned as is: it is not the transform's failure.
func (t *transform) runFunc(ctx context.Context, b *wasm.Batch, keep bool, fn func([]wasm.Output) error) error {
	now := t.m.now()
	t.mu.Lock()
	failed, paused := t.failed, now.Before(t.pausedUntil)
	t.mu.Unlock()
	switch {
	case failed != nil:
		t.failures.Add(1)
		return failed
	case paused:
		t.failures.Add(1)
		return errPaused
	}
	t.recordsIn.Add(int64(b.RecordCount))
	t.batches.Add(1)
	start := time.Now()
	var fnErr error
	n := 0
	consume := func(outs []wasm.Output) error {
		for i := range outs {
			if outs[i].Index == 0 || t.dep.Mode == ModeDerived {
				n++
			}
		}
		fnErr = fn(outs)
		return nil
	}
	var err error
	if keep {
		err = t.pool.TransformFunc(ctx, b, consume)
	} else {
		var outs []wasm.Output
		if outs, err = t.pool.Transform(ctx, b); err == nil {
			_ = consume(outs)
		}
	}
	d := time.Since(start).Nanoseconds()
	t.latencyNs.Store(d)
	if old := t.latencyEWMA.Load(); old == 0 {
		t.latencyEWMA.Store(d)
	} else {
		t.latencyEWMA.Store(old + (d-old)/8)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return err // the client went away: not the transform's failure
		}
		t.failures.Add(1)
		t.lastErr = err.Error()
		t.consecutive++
		if t.consecutive >= t.m.BreakerFailures {
			if t.pause == 0 {
				t.pause = time.Duration(t.m.BreakerPauseMs) * time.Millisecond
			} else {
				t.pause = min(2*t.pause, 10*time.Minute)
			}
			t.pausedUntil = now.Add(t.pause)
			t.pauses++
			t.consecutive = 0
			t.m.log.Warn("transform paused after repeated failures", "transform", t.dep.Name,
				"for", t.pause, "last_error", t.lastErr)
		}
		return err
	}
	t.consecutive = 0
	if t.pause > 0 && now.After(t.pausedUntil.Add(t.pause)) {
		t.pause = 0 // healthy for a whole pause period after resuming: reset the backoff
	}
	t.recordsOut.Add(int64(n))
	return fnErr
}

// state is what list shows.
func (t *transform) state() (string, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.failed != nil:
		return "failed", t.lastErr
	case t.m.now().Before(t.pausedUntil):
		return "paused until " + t.pausedUntil.UTC().Format(time.RFC3339), t.lastErr
	}
	return "running", t.lastErr
}

// transformProduce is the inline path: each data batch of records goes through the
// transform, which sees src as the batch's source; control batches pass through.
func (t *transform) transformProduce(ctx context.Context, tp kernel.TopicPartition, src kernel.ProduceSource, records []byte) ([]byte, error) {
	source := wasm.Source{PrincipalType: src.Principal.Type, PrincipalName: src.Principal.Name, ClientID: src.ClientID}
	dec := t.decoders.Get().(*recordbatch.Decoder)
	defer t.decoders.Put(dec)
	bld := t.builders.Get().(*recordbatch.Builder)
	defer t.builders.Put(bld)
	out := make([]byte, 0, len(records)+len(records)/8)
	err := recordbatch.Split(records, func(h recordbatch.Header, batch []byte) error {
		if h.IsControl() {
			out = append(out, batch...)
			return nil
		}
		_, sec, err := dec.Section(batch)
		if err != nil {
			return fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
		wb := &wasm.Batch{
			Topic: tp.Topic, Partition: tp.Partition,
			BaseOffset: -1, BaseTimestamp: h.BaseTimestamp, MaxTimestamp: h.MaxTimestamp,
			Attributes: h.Attributes, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
			BaseSequence: h.BaseSequence, RecordCount: h.RecordCount, Records: sec,
			Source: source,
		}
		// The outputs are consumed inside the callback (the instance reuses their
		// memory for its next batch): the batch is built before it returns.
		var buildErr error
		err = t.runFunc(ctx, wb, true, func(outs []wasm.Output) error {
			if len(outs) == 0 {
				return nil
			}
			if unchanged(&h, sec, outs) {
				// Every record came back as it went in (an identity or a filter that
				// kept everything): the input batch is the output, as it is, with its
				// codec and CRC; no rebuild, no recompression.
				out = append(out, batch...)
				return nil
			}
			if buildErr = bld.Reset(recordbatch.OptionsFrom(h)); buildErr != nil {
				return nil
			}
			for i := range outs {
				o := &outs[i]
				r := recordbatch.Record{Key: o.Key, Value: o.Value, TimestampDelta: o.TimestampDelta}
				if len(o.Headers) > 0 {
					r.Headers = make([]recordbatch.RecordHeader, len(o.Headers))
					for j, hd := range o.Headers {
						r.Headers[j] = recordbatch.RecordHeader{Key: []byte(hd.Key), Value: hd.Value}
					}
				}
				bld.Add(&r)
			}
			out, buildErr = bld.AppendTo(out)
			return nil
		})
		if err != nil {
			return t.onFailure(ctx, tp, h, batch, err)
		}
		return buildErr
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// onFailure applies the error policy to a batch the transform failed on: nil to go
// on without it (drop, dlq), or the error the partition answers (reject).
func (t *transform) onFailure(ctx context.Context, tp kernel.TopicPartition, h recordbatch.Header, batch []byte, cause error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %v", kerr.RequestTimedOut, ctx.Err())
	}
	switch t.dep.Policy {
	case PolicyDrop:
		t.dropped.Add(int64(h.RecordCount))
		return nil
	case PolicyDLQ:
		if err := t.writeDLQ(ctx, tp, batch, cause); err != nil {
			t.m.log.Warn("dead-letter write failed; rejecting the batch", "transform", t.dep.Name, "err", err)
			return fmt.Errorf("%w: transform %s failed (%v) and its dead-letter write failed (%v)", kerr.InvalidRecord, t.dep.Name, cause, err)
		}
		t.dlq.Add(int64(h.RecordCount))
		return nil
	}
	return fmt.Errorf("%w: transform %s: %v", kerr.InvalidRecord, t.dep.Name, cause)
}

// writeDLQ writes the batch's original records to the dead-letter topic with headers
// saying why: sluice.transform, sluice.error, sluice.source.topic,
// sluice.source.partition.
func (t *transform) writeDLQ(ctx context.Context, tp kernel.TopicPartition, batch []byte, cause error) error {
	topic := t.dep.DLQTopic
	im := t.m.meta.Image()
	ti := im.Topic(topic)
	if ti == nil && t.m.creator != nil {
		var err error
		if ti, err = t.m.creator.CreateTopic(ctx, topic, -1, -1, nil); err != nil {
			return err
		}
	}
	if ti == nil || len(ti.Partitions) == 0 {
		return fmt.Errorf("dead-letter topic %s does not exist", topic)
	}
	extra := []recordbatch.RecordHeader{
		{Key: []byte("sluice.transform"), Value: []byte(t.dep.Name)},
		{Key: []byte("sluice.error"), Value: []byte(truncate(cause.Error(), 1024))},
		{Key: []byte("sluice.source.topic"), Value: []byte(tp.Topic)},
		{Key: []byte("sluice.source.partition"), Value: []byte(strconv.Itoa(int(tp.Partition)))},
	}
	var recs []recordbatch.Record
	var d recordbatch.Decoder
	info, err := d.Records(batch, func(r *recordbatch.Record) error {
		c := recordbatch.Record{
			TimestampDelta: r.TimestampDelta,
			Key:            slices.Clone(r.Key),
			Value:          slices.Clone(r.Value),
			Headers:        append(slices.Clone(r.Headers), extra...),
		}
		recs = append(recs, c)
		return nil
	})
	if err != nil {
		return err
	}
	h := info.Header
	out := recordbatch.Build(recordbatch.Options{Codec: h.Codec(), BaseTimestamp: h.BaseTimestamp, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs...)
	dtp := kernel.TopicPartition{Topic: topic, Partition: tp.Partition % int32(len(ti.Partitions))}
	_, err = t.m.parts.Append(ctx, dtp, out)
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// errDiffers stops unchanged's scan at the first record that differs.
var errDiffers = errors.New("differs")

// unchanged reports whether outs are exactly the records of the input section sec
// (header h), in order, on output 0: same key, value, headers and timestamp, null and
// empty told apart. It reads the section in place and allocates nothing.
func unchanged(h *recordbatch.Header, sec []byte, outs []wasm.Output) bool {
	if len(outs) != int(h.RecordCount) {
		return false
	}
	i := 0
	err := recordbatch.ScanSection(h, sec, func(r *recordbatch.Record) error {
		o := &outs[i]
		i++
		if o.Index != 0 || o.TimestampDelta != r.TimestampDelta || !sameBytes(o.Key, r.Key) ||
			!sameBytes(o.Value, r.Value) || len(o.Headers) != len(r.Headers) {
			return errDiffers
		}
		for j := range o.Headers {
			if o.Headers[j].Key != string(r.Headers[j].Key) || !sameBytes(o.Headers[j].Value, r.Headers[j].Value) {
				return errDiffers
			}
		}
		return nil
	})
	return err == nil && i == len(outs)
}

// sameBytes is bytes.Equal that tells null (nil) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
