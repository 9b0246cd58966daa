package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// fakeTransformer is a kernel.ProduceTransformer for the bound topics: it decodes each
// input batch, maps every record through fn (which returns the records to keep in its
// place) and re-encodes the kept ones with the input batch's options, as the contract
// asks. err, when set, is returned instead.
type fakeTransformer struct {
	bound map[string]bool
	fn    func(r *recordbatch.Record) []recordbatch.Record
	err   error

	boundCalls, calls atomic.Int32
	mu                sync.Mutex
	out               []byte // the last output
}

func (f *fakeTransformer) Bound(topic string) bool {
	f.boundCalls.Add(1)
	return f.bound[topic]
}

func (f *fakeTransformer) TransformProduce(_ context.Context, _ kernel.TopicPartition, _ kernel.ProduceSource, records []byte) ([]byte, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	var out []byte
	var dec recordbatch.Decoder
	err := recordbatch.Split(records, func(h recordbatch.Header, batch []byte) error {
		b, err := recordbatch.NewBuilder(recordbatch.OptionsFrom(h))
		if err != nil {
			return err
		}
		if _, err := dec.Records(batch, func(r *recordbatch.Record) error {
			for _, o := range f.fn(r) {
				b.Add(&o)
			}
			return nil
		}); err != nil {
			return err
		}
		if b.Len() == 0 {
			return nil
		}
		out, err = b.AppendTo(out)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.out = bytes.Clone(out)
	f.mu.Unlock()
	return out, nil
}

func upper(r *recordbatch.Record) []recordbatch.Record {
	o := *r
	o.Value = bytes.ToUpper(r.Value)
	return []recordbatch.Record{o}
}

// fetchValues fetches tp from offset 0 and returns the record values and the raw
// record bytes.
func (h *harness) fetchValues(topic string, id byte) ([]string, []byte) {
	h.t.Helper()
	f := h.fetch(context.Background(), 12, fetchReq(topic, id, 0, 0))
	p := f.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		h.t.Fatalf("fetch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	var vals []string
	err := recordbatch.Split(p.RecordBatches, func(_ recordbatch.Header, batch []byte) error {
		_, err := recordbatch.Records(batch, nil, func(r *recordbatch.Record) error {
			vals = append(vals, string(r.Value))
			return nil
		})
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return vals, p.RecordBatches
}

func (h *harness) leo(topic string) int64 {
	return h.m.partition(kernel.TopicPartition{Topic: topic}).log.LogEndOffset()
}

func transformHarness(t *testing.T, ft *fakeTransformer, topics ...topicSpec) *harness {
	t.Helper()
	h := newHarness(t, nil, topics...)
	h.m.SetProduceTransformer(ft)
	return h
}

func TestTransformMap(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: upper}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1})
	in := testBatch(3, "abc")
	res := h.produce(9, 1, "t", 0, in)
	if res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("%v %+v", kerr.ErrorForCode(res.ErrorCode), res)
	}
	vals, _ := h.fetchValues("t", 1)
	if strings.Join(vals, ",") != "ABC,ABC,ABC" || h.leo("t") != 3 || ft.calls.Load() != 1 {
		t.Fatalf("values %q, leo %d, calls %d", vals, h.leo("t"), ft.calls.Load())
	}
}

func TestTransformFilter(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: func(r *recordbatch.Record) []recordbatch.Record {
		for _, hd := range r.Headers {
			if string(hd.Key) == "drop" {
				return nil
			}
		}
		return []recordbatch.Record{*r}
	}}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1})
	drop := []recordbatch.RecordHeader{{Key: []byte("drop")}}
	in := recordbatch.Build(recordbatch.Options{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000},
		recordbatch.Record{Value: []byte("a")},
		recordbatch.Record{Value: []byte("b"), Headers: drop},
		recordbatch.Record{Value: []byte("c")},
		recordbatch.Record{Value: []byte("d"), Headers: drop},
	)
	if res := h.produce(9, 1, "t", 0, in); res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("%v %+v", kerr.ErrorForCode(res.ErrorCode), res)
	}
	vals, _ := h.fetchValues("t", 1)
	if strings.Join(vals, ",") != "a,c" || h.leo("t") != 2 {
		t.Fatalf("values %q, leo %d", vals, h.leo("t"))
	}
}

// TestTransformDropAll: a transform that drops every record appends nothing and the
// partition answers success at the current log end offset, for every acks.
func TestTransformDropAll(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: func(r *recordbatch.Record) []recordbatch.Record {
		if string(r.Value) == "drop" {
			return nil
		}
		return []recordbatch.Record{*r}
	}}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1})
	if res := h.produce(9, 1, "t", 0, testBatch(3, "keep")); res.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(res.ErrorCode))
	}
	if _, err := h.m.partition(kernel.TopicPartition{Topic: "t"}).deleteRecordsBefore(1); err != nil {
		t.Fatal(err)
	}
	for _, acks := range []int16{1, -1} {
		res := h.produce(9, acks, "t", 0, testBatch(2, "drop"))
		if res.ErrorCode != 0 || res.BaseOffset != 3 || res.LogStartOffset != 1 || res.LogAppendTime != -1 {
			t.Fatalf("acks=%d: %v %+v", acks, kerr.ErrorForCode(res.ErrorCode), res)
		}
	}
	resp, err := h.do(context.Background(), 9, produceReq(0, "t", 1, 0, testBatch(2, "drop")))
	if err != nil || !resp.NoResponse {
		t.Fatalf("acks=0: %+v %v", resp, err)
	}
	if h.leo("t") != 3 || ft.calls.Load() != 4 {
		t.Fatalf("leo %d, calls %d", h.leo("t"), ft.calls.Load())
	}
}

func TestTransformExpand(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: func(r *recordbatch.Record) []recordbatch.Record {
		a, b := *r, *r
		a.Value = append(bytes.Clone(r.Value), '1')
		b.Value = append(bytes.Clone(r.Value), '2')
		return []recordbatch.Record{a, b}
	}}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1})
	if res := h.produce(9, 1, "t", 0, testBatch(1, "v")); res.ErrorCode != 0 || res.BaseOffset != 0 {
		t.Fatalf("%v %+v", kerr.ErrorForCode(res.ErrorCode), res)
	}
	if res := h.produce(9, 1, "t", 0, testBatch(1, "w")); res.ErrorCode != 0 || res.BaseOffset != 2 {
		t.Fatalf("%v %+v", kerr.ErrorForCode(res.ErrorCode), res)
	}
	vals, _ := h.fetchValues("t", 1)
	if strings.Join(vals, ",") != "v1,v2,w1,w2" || h.leo("t") != 4 {
		t.Fatalf("values %q, leo %d", vals, h.leo("t"))
	}
}

func TestTransformErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		want    *kerr.Error
		wantMsg string
	}{
		{"kerr", kerr.PolicyViolation, kerr.PolicyViolation, kerr.PolicyViolation.Error()},
		{"wrapped kerr", fmt.Errorf("rejected by policy: %w", kerr.PolicyViolation), kerr.PolicyViolation, "rejected by policy"},
		{"other", errors.New("wasm trap"), kerr.UnknownServerError, "produce transform failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: upper, err: tc.err}
			h := transformHarness(t, ft, topicSpec{name: "t", id: 1})
			res := h.produce(9, 1, "t", 0, testBatch(2, "x"))
			if res.ErrorCode != tc.want.Code {
				t.Fatalf("got %v, want %v", kerr.ErrorForCode(res.ErrorCode), tc.want)
			}
			if res.ErrorMessage == nil || !strings.Contains(*res.ErrorMessage, tc.wantMsg) {
				t.Fatalf("message %v, want %q", res.ErrorMessage, tc.wantMsg)
			}
			if strings.Contains(*res.ErrorMessage, "wasm trap") {
				t.Fatal("a non-kerr error's text leaked to the client")
			}
			// v7 has no error message.
			if res := h.produce(7, 1, "t", 0, testBatch(2, "x")); res.ErrorCode != tc.want.Code || res.ErrorMessage != nil {
				t.Fatalf("v7: %+v", res)
			}
			// acks=-1 fails the same way, acks=0 closes the connection.
			if res := h.produce(9, -1, "t", 0, testBatch(2, "x")); res.ErrorCode != tc.want.Code {
				t.Fatalf("acks=-1: %v", kerr.ErrorForCode(res.ErrorCode))
			}
			if _, err := h.do(context.Background(), 9, produceReq(0, "t", 1, 0, testBatch(2, "x"))); err == nil {
				t.Fatal("acks=0 with a failed transform must close the connection")
			}
			if h.leo("t") != 0 {
				t.Fatalf("leo %d after failed transforms", h.leo("t"))
			}
		})
	}
}

// TestTransformOutputValidated: the output passes the same validation as produced
// input; too large for max.message.bytes is MESSAGE_TOO_LARGE, nothing appended.
func TestTransformOutputValidated(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"small": true}, fn: func(r *recordbatch.Record) []recordbatch.Record {
		o := *r
		o.Value = bytes.Repeat(r.Value, 500)
		return []recordbatch.Record{o}
	}}
	h := transformHarness(t, ft, topicSpec{name: "small", id: 1, configs: map[string]string{"max.message.bytes": "200"}})
	in := testBatch(1, "x")
	if len(in) > 200 {
		t.Fatalf("input of %d bytes is already too large", len(in))
	}
	res := h.produce(9, 1, "small", 0, in)
	if res.ErrorCode != kerr.MessageTooLarge.Code || ft.calls.Load() != 1 {
		t.Fatalf("got %v, calls %d", kerr.ErrorForCode(res.ErrorCode), ft.calls.Load())
	}
	if h.leo("small") != 0 {
		t.Fatalf("leo %d", h.leo("small"))
	}
	// A corrupt output is refused too.
	ft2 := &corruptingTransformer{}
	h.m.SetProduceTransformer(ft2)
	if res := h.produce(9, 1, "small", 0, testBatch(1, "x")); res.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("corrupt output: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	if h.leo("small") != 0 {
		t.Fatalf("leo %d", h.leo("small"))
	}
}

type corruptingTransformer struct{}

func (corruptingTransformer) Bound(string) bool { return true }
func (corruptingTransformer) TransformProduce(_ context.Context, _ kernel.TopicPartition, _ kernel.ProduceSource, records []byte) ([]byte, error) {
	out := bytes.Clone(records)
	out[len(out)-1] ^= 0xff
	return out, nil
}

// TestTransformUnboundAndInternal: unbound topics, the kernel.Partitions append path
// and an unset transformer never reach TransformProduce.
func TestTransformUnboundAndInternal(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true, "__internal": true}, fn: upper}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1}, topicSpec{name: "plain", id: 2}, topicSpec{name: "__internal", id: 3})
	im := h.meta.Image()
	im.Topic("__internal").Internal = true
	h.meta.publish(im)

	if res := h.produce(9, 1, "plain", 0, testBatch(1, "abc")); res.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(res.ErrorCode))
	}
	if ft.calls.Load() != 0 || ft.boundCalls.Load() != 1 {
		t.Fatalf("unbound: calls %d, bound calls %d", ft.calls.Load(), ft.boundCalls.Load())
	}
	if vals, _ := h.fetchValues("plain", 2); len(vals) != 1 || vals[0] != "abc" {
		t.Fatalf("unbound values %q", vals)
	}
	// Internal writers: kernel.Partitions.Append to a bound topic is not transformed.
	if _, err := h.m.Append(context.Background(), kernel.TopicPartition{Topic: "t"}, testBatch(1, "abc")); err != nil {
		t.Fatal(err)
	}
	// Nor is a produce to an internal topic (by the admin client).
	claim := h.ctx.handlers[kmsg.Produce.Int16()]
	body := produceReq(1, "__internal", 3, 0, testBatch(1, "abc"))
	body.SetVersion(9)
	resp, err := claim.h(context.Background(), &kernel.Request{Key: body.Key(), Version: 9, Body: body, ClientID: adminClientID,
		Conn: &kernel.ConnInfo{Listener: "PLAINTEXT", Principal: kernel.Anonymous}, Authorizer: kernel.AllowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatal(kerr.ErrorForCode(c))
	}
	if ft.calls.Load() != 0 {
		t.Fatalf("internal paths transformed: %d calls", ft.calls.Load())
	}
	if vals, _ := h.fetchValues("t", 1); len(vals) != 1 || vals[0] != "abc" {
		t.Fatalf("Append values %q", vals)
	}
	// Unset: nothing is called any more.
	h.m.SetProduceTransformer(nil)
	bc := ft.boundCalls.Load()
	if res := h.produce(9, 1, "t", 0, testBatch(1, "abc")); res.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(res.ErrorCode))
	}
	if ft.calls.Load() != 0 || ft.boundCalls.Load() != bc {
		t.Fatalf("unset: calls %d, bound calls %d (was %d)", ft.calls.Load(), ft.boundCalls.Load(), bc)
	}
}

// TestTransformLogAppendTime: the output of a LogAppendTime topic is stamped, as a
// produced batch would be.
func TestTransformLogAppendTime(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: upper}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1, configs: map[string]string{"message.timestamp.type": "LogAppendTime"}})
	fixed := time.UnixMilli(1_800_000_000_000)
	h.m.now = func() time.Time { return fixed }
	res := h.produce(9, 1, "t", 0, testBatch(2, "x"))
	if res.ErrorCode != 0 || res.LogAppendTime != fixed.UnixMilli() {
		t.Fatalf("%+v", res)
	}
	vals, b := h.fetchValues("t", 1)
	hd, err := recordbatch.ParseHeader(b)
	if err != nil || hd.Attributes&recordbatch.AttrLogAppendTime == 0 || hd.MaxTimestamp != fixed.UnixMilli() {
		t.Fatalf("header %+v %v", hd, err)
	}
	if err := recordbatch.CheckCRC(b); err != nil {
		t.Fatal(err)
	}
	if strings.Join(vals, ",") != "X,X" {
		t.Fatalf("values %q", vals)
	}
}

// TestTransformFetchServesStoredBytes: a fetch after a transformed produce returns
// exactly what the log holds (the transform's output with offsets and epoch), and the
// produce byte metric counts the stored bytes.
func TestTransformFetchServesStoredBytes(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: func(r *recordbatch.Record) []recordbatch.Record {
		o := *r
		o.Value = []byte(strings.Repeat(string(r.Value), 3))
		return []recordbatch.Record{o}
	}}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1})
	var outs []byte
	for i := range 3 {
		res := h.produce(9, 1, "t", 0, testBatch(2, fmt.Sprint("v", i)))
		if res.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(res.ErrorCode))
		}
		ft.mu.Lock()
		out := bytes.Clone(ft.out)
		ft.mu.Unlock()
		recordbatch.SetBaseOffset(out, res.BaseOffset)
		outs = append(outs, out...)
	}
	_, fetched := h.fetchValues("t", 1)
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	rr, err := p.log.Read(0, 1<<20, p.HighWatermark(), true)
	if err != nil {
		t.Fatal(err)
	}
	stored := bodyBytes(t, &kernel.Body{Chunks: rr.Chunks, Release: rr.Release})
	if !bytes.Equal(fetched, stored) {
		t.Fatalf("fetch returned %d bytes, the log holds %d", len(fetched), len(stored))
	}
	// The stored bytes are the transform's outputs, with the offsets and the leader
	// epoch (5) the append assigned.
	err = recordbatch.Split(outs, func(_ recordbatch.Header, b []byte) error {
		b[recordbatch.OffLeaderEpoch+3] = 5
		return nil
	})
	if err != nil || !bytes.Equal(stored, outs) {
		t.Fatalf("stored bytes differ from the transform's output (%v)", err)
	}
	var text bytes.Buffer
	h.ctx.metrics.WriteText(&text)
	if want := fmt.Sprintf("sluice_produce_bytes_total %d\n", len(stored)); !strings.Contains(text.String(), want) {
		t.Fatalf("metrics lack %q", want)
	}
}

// TestTransformAcks: every acks value works with a transformed produce; acks=-1 waits
// for the output's last offset.
func TestTransformAcks(t *testing.T) {
	ft := &fakeTransformer{bound: map[string]bool{"t": true}, fn: func(r *recordbatch.Record) []recordbatch.Record {
		return []recordbatch.Record{*r, *r} // 1 -> 2, so the output's last offset differs from the input's
	}}
	h := transformHarness(t, ft, topicSpec{name: "t", id: 1})
	resp, err := h.do(context.Background(), 9, produceReq(0, "t", 1, 0, testBatch(1, "x")))
	if err != nil || !resp.NoResponse {
		t.Fatalf("acks=0: %+v %v", resp, err)
	}
	if res := h.produce(9, 1, "t", 0, testBatch(1, "x")); res.ErrorCode != 0 || res.BaseOffset != 2 {
		t.Fatalf("acks=1: %+v", res)
	}

	// acks=-1 with a follower in the ISR: the produce waits until the follower has
	// the output's last offset (5), not the input's (4).
	// (A new image: published images are never modified, and applying diffs them.)
	im := image(h.meta.Image().Version+1, topicSpec{name: "t", id: 1})
	pi := &im.Topic("t").Partitions[0]
	pi.Replicas, pi.ISR = []int32{1, 2}, []int32{1, 2}
	h.meta.publish(im)
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	p.updateFollower(2, 4)
	done := h.produceAsync(produceReq(-1, "t", 1, 0, testBatch(1, "x")))
	waitFor(t, func() bool { return p.log.LogEndOffset() == 6 && h.m.pg.watching(p.tp) == 1 })
	p.updateFollower(2, 5) // HW 5: the input's last offset, not the output's
	select {
	case res := <-done:
		t.Fatalf("acks=-1 answered before the HW passed the output: %+v", res)
	case <-time.After(50 * time.Millisecond):
	}
	p.updateFollower(2, 6)
	if res := <-done; res.ErrorCode != 0 || res.BaseOffset != 4 {
		t.Fatalf("acks=-1: %v %+v", kerr.ErrorForCode(res.ErrorCode), res)
	}
}

// TestTransformNoOverheadWithoutTransformer: with no transformer registered the
// produce path allocates exactly as with a registered one that binds nothing, and
// Bound is only consulted when a transformer is set.
func TestTransformNoOverheadWithoutTransformer(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are off under the race detector")
	}
	h := newHarness(t, nil)
	h.ctx.storage = nil
	h.m.storage = &nullStorage{}
	h.meta.publish(image(2, topicSpec{name: "t", id: 1}))
	req := produceReq(1, "t", 1, 0, testBatch(10, "0123456789"))
	ctx := context.Background()
	run := func() {
		if _, err := h.do(ctx, 11, req); err != nil {
			t.Fatal(err)
		}
	}
	run()
	without := testing.AllocsPerRun(200, run)
	ft := &fakeTransformer{bound: map[string]bool{}, fn: upper}
	h.m.SetProduceTransformer(ft)
	with := testing.AllocsPerRun(200, run)
	if without != with {
		t.Fatalf("allocs per produce: %v without a transformer, %v with an unbound one", without, with)
	}
	if ft.calls.Load() != 0 || ft.boundCalls.Load() == 0 {
		t.Fatalf("calls %d, bound calls %d", ft.calls.Load(), ft.boundCalls.Load())
	}
}
