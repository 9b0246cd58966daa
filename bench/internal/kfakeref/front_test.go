package kfakeref

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The canned batch is pinned byte for byte: these are the hashes of what the broker's
// record batch builder wrote when the front used it, so the ceiling serves what it
// served then, whatever the codec.
func TestCannedBatchPinned(t *testing.T) {
	for _, c := range []struct {
		size   int
		random float64
		codec  string
		fill   int
		n      int64
		sha256 string
	}{
		{100, 0, "none", 131072, 1214, "2f0a91493d66d066fb7c127672d3a5d0bc90b41b3feab1499f41abdce67548f2"},
		{1024, 0, "lz4", 131072, 128, "f508cc5c9285b81a0c935a069a3d68512415a5c05826efd30c0cb1b9f4481a94"},
		{100, 0.5, "none", 10000, 93, "08fdd72b2e4f4912a99da20ce6298e4c22ec95cb9b299f67fa84c7b7faf16ae2"},
		{100, 0.5, "gzip", 10000, 93, "7afe45364b332935620d7b0dc54e4226467c815d3f0f1732e7aa0eafc33188d3"},
		{100, 0.5, "snappy", 10000, 93, "fc954456946fed4b22243aad3d402c3e683386a1ba9ba56c5e3c0254f91054de"},
		{100, 0.5, "lz4", 10000, 93, "4212256f0fca84696f0fbe2d7952a97d9103625005e276173a55670c02ae4b4e"},
		{100, 0.5, "zstd", 10000, 93, "2e64165091c56b46fa81a465d5165d2d9b1e2546bef782b40defc5cfb1c45baf"},
		{1024, 0.3, "zstd", 131072, 128, "d6912bfe458acb242d7c3fa68618324fa169820db04343faa5d4977ff56879ca"},
		{0, 0, "none", 1, 1, "43169dc328ef980d16fc159e977f447ffa2e125b63bb66850e20787414ae4edd"},
		{7, 1, "gzip", 50, 4, "c149185655a6ee936321ec477815e2b12bfc59b89ffbfcb9a04f517454d0d657"},
	} {
		b, n, err := CannedBatch(c.size, c.random, c.codec, c.fill)
		if err != nil {
			t.Fatal(err)
		}
		if sum := fmt.Sprintf("%x", sha256.Sum256(b)); n != c.n || sum != c.sha256 {
			t.Errorf("CannedBatch(%d, %v, %s, %d): %d records, sha256 %s; want %d, %s", c.size, c.random, c.codec, c.fill, n, sum, c.n, c.sha256)
		}
	}
}

func TestCannedBatch(t *testing.T) {
	b, n, err := CannedBatch(100, 0.5, "none", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil || int(batch.Length)+logOverhead != len(b) || batch.NumRecords != int32(n) {
		t.Fatalf("batch: %v, length %d of %d bytes, %d records of %d", err, batch.Length, len(b), batch.NumRecords, n)
	}
	if crc := crc32.Checksum(b[offAttributes:], crc32.MakeTable(crc32.Castagnoli)); uint32(batch.CRC) != crc {
		t.Fatalf("crc %x, want %x", uint32(batch.CRC), crc)
	}
	var got int64
	for rest := batch.Records; len(rest) > 0; got++ {
		size, k := binary.Varint(rest)
		if k <= 0 || int(size) > len(rest)-k {
			t.Fatalf("record %d: bad length", got)
		}
		var r kmsg.Record
		if err := r.ReadFrom(rest[:k+int(size)]); err != nil || len(r.Value) != 100 || int64(r.OffsetDelta) != got || r.Key != nil {
			t.Fatalf("record %d: %v: offset delta %d, %d bytes", got, err, r.OffsetDelta, len(r.Value))
		}
		rest = rest[k+int(size):]
	}
	if got != n || n < 10_000/108 {
		t.Fatalf("%d records, says %d", got, n)
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
