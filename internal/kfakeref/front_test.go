package kfakeref

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
)

func TestCannedBatch(t *testing.T) {
	for _, codec := range []string{"none", "lz4", "zstd"} {
		b, n, err := CannedBatch(100, 0.5, codec, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		_, err = recordbatch.Records(b, nil, func(r *recordbatch.Record) error {
			if len(r.Value) != 100 || r.Offset != got {
				t.Fatalf("%s: record %d: offset %d, %d bytes", codec, got, r.Offset, len(r.Value))
			}
			got++
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		if got != n || n < 10_000/108 {
			t.Fatalf("%s: %d records, says %d", codec, got, n)
		}
	}
	for _, bad := range []struct {
		size   int
		random float64
		codec  string
		fill   int
	}{{-1, 0, "none", 1}, {1, 2, "none", 1}, {1, 0, "brotli", 1}, {1, 0, "none", 0}} {
		if _, _, err := CannedBatch(bad.size, bad.random, bad.codec, bad.fill); err == nil {
			t.Errorf("CannedBatch(%+v) succeeded", bad)
		}
	}
}

// The front acknowledges producers, and serves a plain consumer and a group consumer,
// through its own address only
// (the backend's address never reaches the client), with contiguous offsets from where
// each fetch asked, across several fetches of each partition.
func TestFront(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	back, err := Start(Options{Mode: Ceiling})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	batch, per, err := CannedBatch(64, 1, "none", 4096)
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFront(0, back.ListenAddrs()[0], batch, per)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	adm, err := kgo.NewClient(kgo.SeedBrokers(f.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 3, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	md, err := kadm.NewClient(adm).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(f.Addr())
	for _, b := range md.Brokers {
		if b.Host != host || strconv.Itoa(int(b.Port)) != port {
			t.Fatalf("metadata names %s:%d, want the front %s", b.Host, b.Port, f.Addr())
		}
	}

	// Produce: acknowledged with contiguous offsets per partition, idempotent or not;
	// acks=0 gets no answer and does not stall the connection.
	for _, o := range [][]kgo.Opt{{kgo.RequiredAcks(kgo.AllISRAcks())},
		{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()},
		{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}} {
		cl, err := kgo.NewClient(append(o, kgo.SeedBrokers(f.Addr()), kgo.DefaultProduceTopic("t"))...)
		if err != nil {
			t.Fatal(err)
		}
		results := cl.ProduceSync(ctx, func() []*kgo.Record {
			var rs []*kgo.Record
			for i := range 300 {
				rs = append(rs, &kgo.Record{Partition: int32(i % 3), Value: []byte("x")})
			}
			return rs
		}()...)
		if err := results.FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(f.Addr()), kgo.DefaultProduceTopic("t2"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 2, 1, nil, "t2"); err != nil {
		t.Fatal(err)
	}
	seen := map[int32]int64{}
	for i := range 50 {
		r := &kgo.Record{Partition: int32(i % 2), Value: []byte("y")}
		if err := pcl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if r.Offset != seen[r.Partition] {
			t.Fatalf("record %d to partition %d acknowledged at offset %d, want %d", i, r.Partition, r.Offset, seen[r.Partition])
		}
		seen[r.Partition]++
	}
	pcl.Close()

	for _, group := range []string{"", "g"} {
		opts := []kgo.Opt{kgo.SeedBrokers(f.Addr()), kgo.ConsumeTopics("t"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(2 * int32(len(batch)))}
		if group != "" {
			opts = append(opts, kgo.ConsumerGroup(group))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		next := map[int32]int64{}
		want := 5 * 3 * per // several fetches of each partition
		for got := int64(0); got < want; {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("group %q: %d of %d records: %v (%v)", group, got, want, err, fs.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next[r.Partition] || len(r.Value) != 64 {
					t.Fatalf("group %q: partition %d: offset %d (want %d), %d bytes", group, r.Partition, r.Offset, next[r.Partition], len(r.Value))
				}
				next[r.Partition]++
				got++
			})
		}
		if len(next) != 3 {
			t.Errorf("group %q: read %d partitions, want 3", group, len(next))
		}
		cl.Close()
	}
}

func TestFrontRefuses(t *testing.T) {
	batch, per, err := CannedBatch(10, 0, "none", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StartFront(-1, "127.0.0.1:1", batch, per); err == nil {
		t.Error("port -1 accepted")
	}
	if _, err := StartFront(0, "127.0.0.1:1", batch[:20], per); err == nil {
		t.Error("a truncated batch accepted")
	}
	if _, err := StartFront(0, "127.0.0.1:1", batch, 0); err == nil {
		t.Error("0 records per batch accepted")
	}
	// Garbage on the wire closes that connection and nothing else.
	f, err := StartFront(0, "127.0.0.1:1", batch, per)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, junk := range [][]byte{{0, 0, 0, 1, 0}, {0x7f, 0, 0, 0}, {0, 0, 0, 8, 0x7f, 0, 0, 0, 0, 0, 0, 0}} {
		c, err := net.Dial("tcp", f.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write(junk)
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("junk %x: read %d bytes, want the connection closed", junk, n)
		}
		c.Close()
	}
}

// readSized takes a frame whole, and a peer claiming a 50 MiB frame that sends ten bytes
// gets an error without the front allocating for the claim.
func TestReadSized(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, 9)
	frame = append(frame, "123456789"...)
	got, err := readSized(bytes.NewReader(frame), nil)
	if err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("got %q, %v", got, err)
	}
	lie := binary.BigEndian.AppendUint32(nil, 50<<20)
	lie = append(lie, "0123456789"...)
	got, err = readSized(bytes.NewReader(lie), nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: err %v", err)
	}
	if cap(got) > 1<<20 {
		t.Fatalf("a 14-byte read grew the buffer to %d bytes", cap(got))
	}
}

// Close returns while a relayed request waits on a backend that never answers.
func TestFrontCloseDuringRelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan struct{})
	go func() { // a backend that reads a request and never answers
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Read(make([]byte, 1))
		close(got)
		_, _ = io.Copy(io.Discard, c)
	}()
	batch, per, err := CannedBatch(10, 0, "none", 100)
	if err != nil {
		t.Fatal(err)
	}
	f, err := StartFront(0, ln.Addr().String(), batch, per)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	body := req.AppendTo([]byte{0, 3, 0, 1, 0, 0, 0, 7, 0xff, 0xff}) // key, version, correlation, null client id
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the backend")
	}
	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting on the relay")
	}
}
