package replication

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

func testBatch(n int, value string) []byte {
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{OffsetDelta: int32(i), Key: []byte("k"), Value: []byte(value)}
	}
	return recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1, BaseTimestamp: 1_700_000_000_000}, recs...)
}

// encodeCase builds a response exercising every field the version has, and the kmsg
// response that says the same.
func encodeCase(t *testing.T, v int16, file *os.File, fileData []byte) (*fetchResponse, *kmsg.FetchResponse) {
	inMem := testBatch(3, "in memory")
	released := 0
	rel := func() { released++ }
	mk := func(p int32) *fetchPart {
		fp := &fetchPart{partition: p}
		fp.reset()
		fp.hw, fp.lso, fp.logStart = 100+int64(p), 90+int64(p), int64(p)
		return fp
	}
	p0 := mk(0)
	p0.records = kernel.ReadResult{
		Chunks:  []kernel.Chunk{{Bytes: inMem}, {File: file, Off: 7, N: int64(len(fileData))}},
		Size:    int64(len(inMem) + len(fileData)),
		Release: rel,
	}
	p1 := mk(1)
	p1.errorCode = kerr.NotLeaderForPartition.Code
	p1.leaderID, p1.leaderEpoch = 2, 9
	p2 := mk(2)
	p2.abortedTxns = []abortedTxn{}
	p3 := mk(3)
	p3.abortedTxns = []abortedTxn{{producerID: 7, firstOffset: 3}, {producerID: 8, firstOffset: 4}}
	p3.divergingEpoch, p3.divergingEndOffset = 4, 40
	p3.snapshotEndOffset, p3.snapshotEpoch = 50, 5
	q0 := mk(0)
	q0.records = kernel.ReadResult{Chunks: []kernel.Chunk{{Bytes: inMem}}, Size: int64(len(inMem)), Release: rel}
	rack := "r1"
	r := &fetchResponse{
		version: v, throttle: 3, errorCode: 0, sessionID: 77,
		topics: []fetchTopic{
			{name: "alpha", id: [16]byte{1, 2, 3}, parts: []*fetchPart{p0, p1, p2, p3}},
			{name: "beta", id: [16]byte{9}, parts: []*fetchPart{q0}},
			{name: "empty", id: [16]byte{8}},
		},
	}
	if v >= 16 {
		r.endpoints = []nodeEndpoint{{nodeID: 2, host: "h2", port: 9093, rack: &rack}, {nodeID: 3, host: "h3", port: 9094}}
	}

	want := &kmsg.FetchResponse{Version: v}
	want.Default()
	want.ThrottleMillis, want.SessionID = 3, 77
	for _, ft := range r.topics {
		kt := kmsg.NewFetchResponseTopic()
		if v >= 13 {
			kt.TopicID = ft.id
		} else {
			kt.Topic = ft.name
		}
		for _, fp := range ft.parts {
			kp := kmsg.NewFetchResponseTopicPartition()
			kp.Partition, kp.ErrorCode, kp.HighWatermark = fp.partition, fp.errorCode, fp.hw
			if v >= 4 {
				kp.LastStableOffset = fp.lso
				if fp.abortedTxns != nil {
					kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
					for _, a := range fp.abortedTxns {
						ka := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
						ka.ProducerID, ka.FirstOffset = a.producerID, a.firstOffset
						kp.AbortedTransactions = append(kp.AbortedTransactions, ka)
					}
				}
			}
			if v >= 5 {
				kp.LogStartOffset = fp.logStart
			}
			if v >= 12 {
				kp.DivergingEpoch.Epoch, kp.DivergingEpoch.EndOffset = fp.divergingEpoch, fp.divergingEndOffset
				kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = fp.leaderID, fp.leaderEpoch
				kp.SnapshotID.EndOffset, kp.SnapshotID.Epoch = fp.snapshotEndOffset, fp.snapshotEpoch
			}
			kp.RecordBatches = []byte{}
			if fp == p0 {
				kp.RecordBatches = append(append([]byte{}, inMem...), fileData...)
			} else if fp == q0 {
				kp.RecordBatches = inMem
			}
			kt.Partitions = append(kt.Partitions, kp)
		}
		want.Topics = append(want.Topics, kt)
	}
	for _, ne := range r.endpoints {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = ne.nodeID, ne.host, ne.port, ne.rack
		want.Brokers = append(want.Brokers, b)
	}
	t.Cleanup(func() {
		if released != 2 {
			t.Errorf("v%d: released %d record sets, want 2", v, released)
		}
	})
	return r, want
}

func TestFetchEncodeAllVersions(t *testing.T) {
	fileData := testBatch(2, "from a file")
	path := filepath.Join(t.TempDir(), "seg.log")
	if err := os.WriteFile(path, append([]byte("garbage"), fileData...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	for v := int16(4); v <= (&kmsg.FetchResponse{}).MaxVersion(); v++ {
		r, want := encodeCase(t, v, f, fileData)
		body := encodeFetch(r)
		fileChunks := 0
		for _, c := range body.Chunks {
			if c.File != nil {
				fileChunks++
			}
		}
		if fileChunks != 1 {
			t.Errorf("v%d: %d file chunks, want 1 (records must not be copied)", v, fileChunks)
		}
		got := bodyBytes(t, body)
		wantBytes := want.AppendTo(nil)
		if !bytes.Equal(got, wantBytes) {
			t.Errorf("v%d: encoding differs from kmsg's\n got %x\nwant %x", v, got, wantBytes)
			continue
		}
		dec := &kmsg.FetchResponse{Version: v}
		if err := dec.ReadFrom(got); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		if !bytes.Equal(dec.AppendTo(nil), wantBytes) {
			t.Errorf("v%d: decode/re-encode differs", v)
		}
		if len(dec.Topics) != 3 || len(dec.Topics[0].Partitions) != 4 {
			t.Fatalf("v%d: decoded shape %+v", v, dec.Topics)
		}
		p0 := dec.Topics[0].Partitions[0]
		if !bytes.Equal(p0.RecordBatches, want.Topics[0].Partitions[0].RecordBatches) || p0.HighWatermark != 100 {
			t.Errorf("v%d: partition 0 decoded wrong", v)
		}
		if v >= 12 && dec.Topics[0].Partitions[1].CurrentLeader.LeaderEpoch != 9 {
			t.Errorf("v%d: current leader tag lost", v)
		}
		if v >= 16 && len(dec.Brokers) != 2 {
			t.Errorf("v%d: node endpoints lost", v)
		}
	}
}

func TestFetchEncodeTopLevelError(t *testing.T) {
	for v := int16(7); v <= 18; v++ {
		got := bodyBytes(t, encodeFetch(&fetchResponse{version: v, errorCode: kerr.FetchSessionIDNotFound.Code}))
		want := &kmsg.FetchResponse{Version: v}
		want.Default()
		want.ErrorCode = kerr.FetchSessionIDNotFound.Code
		if !bytes.Equal(got, want.AppendTo(nil)) {
			t.Errorf("v%d: %x != %x", v, got, want.AppendTo(nil))
		}
	}
}
