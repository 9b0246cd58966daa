package kfakeref

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Front is the client's ceiling: a listener that answers every Produce and Fetch itself
// and relays every other request to a backend broker (a Ceiling kfake, which creates
// topics, runs groups and answers ListOffsets and InitProducerId). kfake's blackhole
// still runs each produce through its one request loop, and its synthetic fetch builds
// and copies each answer there, which costs more than Sluice's own paths, so it is no
// ceiling; the front does next to nothing per request beyond decoding it:
//
//   - A produce is acknowledged at once with no error: each partition's base offset is
//     the count of records acknowledged to it before (the batch headers' record
//     counts), nothing is stored or checked.
//   - It encodes the response to a fetch of a given shape (version, partitions, byte
//     limits) once per connection, copies of one canned batch per partition, and answers
//     later fetches of that shape by patching the correlation id and each copy's base
//     offset (before the CRC, so the CRC stays valid) and writing the same buffer again.
//   - Every partition has log start 0 and high watermark 1<<62, like kfake's synthetic
//     fetch: a consume against it must be bounded by a record count or a duration.
//   - Requests on one connection are answered one at a time, in order (franz-go keeps
//     fetches, produces and group requests on separate connections, so this does not
//     serialise a consumer's fetches behind its heartbeats). Produce with acks=0 gets no
//     answer, as from any broker.
//   - Metadata, FindCoordinator and DescribeCluster answers from the backend are
//     rewritten to name the front's address, so clients never talk to the backend
//     directly.
type Front struct {
	ln       net.Listener
	backend  string
	host     string
	port     int32
	batch    []byte // the canned batch, base offset 0
	perBatch int64  // records in it

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
	next  map[frontPartition]int64 // produce: the next base offset per partition
}

type frontPartition struct {
	topic string
	id    [16]byte
	p     int32
}

// frontMaxFrame bounds the frames the front reads (Kafka's socket.request.max.bytes).
const frontMaxFrame = 100 << 20

// StartFront listens on 127.0.0.1:port (0: any free port) and serves until Close,
// relaying to backend (host:port) everything but Fetch, which it answers from batch
// (perBatch records, base offset 0; see CannedBatch).
func StartFront(port int, backend string, batch []byte, perBatch int64) (*Front, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrBadOptions, port)
	}
	if err := checkBatch(batch); err != nil || perBatch < 1 {
		return nil, fmt.Errorf("%w: canned batch: %v (records %d)", ErrBadOptions, err, perBatch)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	a := ln.Addr().(*net.TCPAddr)
	f := &Front{ln: ln, backend: backend, host: a.IP.String(), port: int32(a.Port),
		batch: batch, perBatch: perBatch, conns: map[net.Conn]struct{}{}, next: map[frontPartition]int64{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr is the address the front listens on.
func (f *Front) Addr() string { return f.ln.Addr().String() }

// Close stops listening, closes every connection and waits for their goroutines.
func (f *Front) Close() error {
	err := f.ln.Close()
	f.mu.Lock()
	f.done = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

func (f *Front) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.done {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.conns[c] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			f.serve(c)
			f.untrack(c)
		}()
	}
}

// track registers a connection for Close to close; false once closing.
func (f *Front) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Front) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// frontConn is one client connection's state.
type frontConn struct {
	f      *Front
	c      net.Conn
	be     net.Conn // the backend connection, dialled on the first relayed request
	beR    *bufio.Reader
	shapes map[string]*fetchShape
}

// fetchShape is an encoded fetch response and where its batch copies sit in it.
type fetchShape struct {
	buf []byte // the whole frame, size prefix included
	// slots[i] lists the offsets in buf of the copies answering the i-th partition of
	// the (sorted) request (none when the byte limit left it nothing).
	slots [][]int
}

func (f *Front) serve(c net.Conn) {
	fc := &frontConn{f: f, c: c, shapes: map[string]*fetchShape{}}
	defer func() {
		c.Close()
		if fc.be != nil {
			fc.be.Close()
			f.untrack(fc.be)
		}
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	var frame []byte
	for {
		var err error
		if frame, err = readSized(r, frame); err != nil {
			return
		}
		if err := fc.handle(frame); err != nil {
			return
		}
	}
}

// readSized reads one size-prefixed frame (prefix included) into buf. It grows buf as
// bytes arrive rather than trusting the prefix, so a peer that claims a large frame and
// sends nothing costs no memory.
func readSized(r io.Reader, buf []byte) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return buf, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 8 || n > frontMaxFrame {
		return buf, fmt.Errorf("frame size %d", n)
	}
	total := int(n) + 4
	buf = append(buf[:0], sz[:]...)
	for len(buf) < total {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(total-len(buf), max(len(buf), 64<<10)))
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), total)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < total {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

var errFrontRequest = errors.New("kfakeref: malformed request")

// handle answers one request frame (size prefix included).
func (fc *frontConn) handle(frame []byte) error {
	p := frame[4:]
	key, ver := int16(binary.BigEndian.Uint16(p)), int16(binary.BigEndian.Uint16(p[2:]))
	req := kmsg.RequestForKey(key)
	if req == nil || ver < 0 || ver > req.MaxVersion() {
		return fmt.Errorf("%w: key %d version %d", errFrontRequest, key, ver)
	}
	req.SetVersion(ver)
	body, err := skipRequestHeader(p, req.IsFlexible())
	if err != nil {
		return err
	}
	switch key {
	case int16(kmsg.Fetch):
		if err := req.ReadFrom(body); err != nil {
			return fmt.Errorf("%w: fetch: %v", errFrontRequest, err)
		}
		return fc.fetch(p[4:8], req.(*kmsg.FetchRequest))
	case int16(kmsg.Produce):
		if err := req.ReadFrom(body); err != nil {
			return fmt.Errorf("%w: produce: %v", errFrontRequest, err)
		}
		return fc.produce(p[4:8], req.(*kmsg.ProduceRequest))
	}
	return fc.relay(frame, key, ver)
}

// skipRequestHeader returns the body after a v1 (or, flexible, v2) request header.
func skipRequestHeader(p []byte, flexible bool) ([]byte, error) {
	p = p[8:]
	if len(p) < 2 {
		return nil, fmt.Errorf("%w: header", errFrontRequest)
	}
	if l := int16(binary.BigEndian.Uint16(p)); l > 0 {
		if int(l)+2 > len(p) {
			return nil, fmt.Errorf("%w: client id", errFrontRequest)
		}
		p = p[2+int(l):]
	} else {
		p = p[2:]
	}
	if flexible {
		return skipTags(p)
	}
	return p, nil
}

// skipTags skips a tagged-field section.
func skipTags(p []byte) ([]byte, error) {
	n, k := binary.Uvarint(p)
	if k <= 0 {
		return nil, fmt.Errorf("%w: tagged fields", errFrontRequest)
	}
	p = p[k:]
	for ; n > 0; n-- {
		if _, k = binary.Uvarint(p); k <= 0 {
			return nil, fmt.Errorf("%w: tag", errFrontRequest)
		}
		p = p[k:]
		size, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < size {
			return nil, fmt.Errorf("%w: tag size", errFrontRequest)
		}
		p = p[k+int(size):]
	}
	return p, nil
}

// relay sends frame to the backend and its answer to the client (rewritten to name
// the front where it names brokers). Every request relayed has an answer (produce,
// which may not, is never relayed).
func (fc *frontConn) relay(frame []byte, key, ver int16) error {
	if fc.be == nil {
		be, err := net.Dial("tcp", fc.f.backend)
		if err != nil {
			return err
		}
		// Close closes it too, so a relay waiting on a long backend answer (a
		// JoinGroup) does not hold Close up.
		if !fc.f.track(be) {
			be.Close()
			return net.ErrClosed
		}
		fc.be, fc.beR = be, bufio.NewReaderSize(be, 64<<10)
	}
	if _, err := fc.be.Write(frame); err != nil {
		return err
	}
	resp, err := readSized(fc.beR, nil)
	if err != nil {
		return err
	}
	switch key {
	case int16(kmsg.Metadata), int16(kmsg.FindCoordinator), int16(kmsg.DescribeCluster):
		if resp, err = fc.rewrite(resp, key, ver); err != nil {
			return err
		}
	}
	_, err = fc.c.Write(resp)
	return err
}

// rewrite replaces the backend's address with the front's in a response that lists
// brokers.
func (fc *frontConn) rewrite(frame []byte, key, ver int16) ([]byte, error) {
	msg := kmsg.ResponseForKey(key)
	msg.SetVersion(ver)
	body := frame[8:]
	if msg.IsFlexible() {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	if err := msg.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("kfakeref: backend answer to key %d v%d: %v", key, ver, err)
	}
	switch m := msg.(type) {
	case *kmsg.MetadataResponse:
		for i := range m.Brokers {
			m.Brokers[i].Host, m.Brokers[i].Port = fc.f.host, fc.f.port
		}
	case *kmsg.FindCoordinatorResponse:
		m.Host, m.Port = fc.f.host, fc.f.port
		for i := range m.Coordinators {
			m.Coordinators[i].Host, m.Coordinators[i].Port = fc.f.host, fc.f.port
		}
	case *kmsg.DescribeClusterResponse:
		for i := range m.Brokers {
			m.Brokers[i].Host, m.Brokers[i].Port = fc.f.host, fc.f.port
		}
	}
	out := encodeResponse(frame[4:8], msg)
	return out, nil
}

// maxShapes bounds the encoded answers a connection keeps.
const maxShapes = 32

// fetch answers a fetch from the encoded response of its shape.
func (fc *frontConn) fetch(correlation []byte, req *kmsg.FetchRequest) error {
	sortFetch(req) // clients rotate partitions between fetches: one shape per set
	key := shapeKey(req)
	s := fc.shapes[key]
	if s == nil {
		var err error
		if s, err = fc.f.encodeShape(req); err != nil {
			return err
		}
		if len(fc.shapes) >= maxShapes {
			clear(fc.shapes)
		}
		fc.shapes[key] = s
	}
	copy(s.buf[4:8], correlation)
	i := 0
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			for j, at := range s.slots[i] {
				binary.BigEndian.PutUint64(s.buf[at:], uint64(p.FetchOffset+int64(j)*fc.f.perBatch))
			}
			i++
		}
	}
	_, err := fc.c.Write(s.buf)
	return err
}

// sortFetch puts a fetch's topics and partitions in one order, so the same set asked
// in any order has one shape (answers may list partitions in any order).
func sortFetch(req *kmsg.FetchRequest) {
	slices.SortFunc(req.Topics, func(a, b kmsg.FetchRequestTopic) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return bytes.Compare(a.TopicID[:], b.TopicID[:])
	})
	for _, t := range req.Topics {
		slices.SortFunc(t.Partitions, func(a, b kmsg.FetchRequestTopicPartition) int { return cmp.Compare(a.Partition, b.Partition) })
	}
}

// produce acknowledges a produce (acks=0: says nothing).
func (fc *frontConn) produce(correlation []byte, req *kmsg.ProduceRequest) error {
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(req.Version)
	fc.f.mu.Lock()
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			k := frontPartition{t.Topic, t.TopicID, p.Partition}
			rp.BaseOffset = fc.f.next[k]
			fc.f.next[k] += countRecords(p.Records)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	fc.f.mu.Unlock()
	if req.Acks == 0 {
		return nil
	}
	buf := encodeResponse(correlation, resp)
	_, err := fc.c.Write(buf)
	return err
}

// encodeResponse frames msg as the answer to the request with this correlation id:
// size, correlation id, the empty tagged-field section of a flexible header, body.
func encodeResponse(correlation []byte, msg kmsg.Response) []byte {
	buf := append(make([]byte, 4, 64), correlation...)
	if msg.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = msg.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

// countRecords sums the record counts of the v2 batches in b (what does not parse as
// one counts nothing).
func countRecords(b []byte) int64 {
	var n int64
	for len(b) >= batchHeaderSize {
		size := int(int32(binary.BigEndian.Uint32(b[offBatchLength:]))) + logOverhead
		if size < batchHeaderSize || size > len(b) {
			break
		}
		n += int64(int32(binary.BigEndian.Uint32(b[offRecordCount:])))
		b = b[size:]
	}
	return n
}

// shapeKey names what an encoded answer depends on: the version, the partitions (in
// sortFetch's order) and the byte limits (not the offsets, which are patched in).
func shapeKey(req *kmsg.FetchRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d", req.Version, req.MaxBytes)
	for _, t := range req.Topics {
		fmt.Fprintf(&b, "|%s/%x", t.Topic, t.TopicID)
		for _, p := range t.Partitions {
			fmt.Fprintf(&b, ",%d/%d", p.Partition, p.PartitionMaxBytes)
		}
	}
	return b.String()
}

// encodeShape builds the answer to req: per partition as many copies of the batch as fit
// its PartitionMaxBytes and what is left of MaxBytes (at least one copy for the first
// partition, as Kafka always returns one batch to make progress).
func (f *Front) encodeShape(req *kmsg.FetchRequest) (*fetchShape, error) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(req.Version)
	room := int64(req.MaxBytes)
	if req.Version < 3 || room <= 0 {
		room = 1 << 62
	}
	var copies []int
	first := true
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 1<<62, 1<<62, 0
			n := int(min(int64(p.PartitionMaxBytes), room) / int64(len(f.batch)))
			if n == 0 && first {
				n = 1
			}
			first = false
			room -= int64(n * len(f.batch))
			rp.RecordBatches = bytes.Repeat(f.batch, n)
			copies = append(copies, n)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	buf := encodeResponse(make([]byte, 4), resp) // the correlation id is patched per fetch
	s := &fetchShape{buf: buf}
	at := 0
	i := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			var slot []int
			if copies[i] > 0 {
				k := bytes.Index(buf[at:], p.RecordBatches)
				if k < 0 {
					return nil, errors.New("kfakeref: encoded fetch answer lost its records")
				}
				for j := 0; j < copies[i]; j++ {
					slot = append(slot, at+k+j*len(f.batch))
				}
				at += k + len(p.RecordBatches)
			}
			s.slots = append(s.slots, slot)
			i++
		}
	}
	return s, nil
}
