package replication

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/kernel"
)

// The Fetch response encoder. It writes every field itself so that record bytes never
// pass through a buffer: each partition's records are the Log.Read chunks (file ranges
// for the segment log), interleaved with the encoded bytes around them, and the kernel
// writes the file ranges with sendfile.
//
// Layout by version (after the response header; "c" = compact/flexible form, v12+):
//
//	throttle_ms int32                           v1+
//	error_code int16, session_id int32          v7+
//	[topics]                                    array (c: uvarint n+1)
//	  name string                               v0-12 (c: uvarint len+1)
//	  topic_id uuid                             v13+
//	  [partitions]
//	    partition int32, error_code int16, high_watermark int64
//	    last_stable_offset int64                v4+
//	    log_start_offset int64                  v5+
//	    [aborted_transactions] nullable         v4+  {producer_id int64, first_offset int64}
//	    preferred_read_replica int32            v11+
//	    records nullable bytes                  (c: uvarint len+1; 0 = null)
//	    tags                                    v12+: 0 diverging_epoch, 1 current_leader, 2 snapshot_id
//	  tags                                      v12+
//	tags                                        v12+: 0 node_endpoints (v16+)

// fetchResponse is what the encoder writes.
type fetchResponse struct {
	version   int16
	throttle  int32
	errorCode int16
	sessionID int32
	topics    []fetchTopic
	endpoints []nodeEndpoint // v16+ node_endpoints tag
}

type fetchTopic struct {
	name  string
	id    [16]byte
	parts []*fetchPart
}

type nodeEndpoint struct {
	nodeID int32
	host   string
	port   int32
	rack   *string
}

// fetchPart is one partition of a fetch: the request's parameters and the result.
type fetchPart struct {
	topic       string
	topicID     [16]byte
	partition   int32
	fetchOffset int64
	maxBytes    int32
	curEpoch    int32
	// lastFetchedEpoch is the epoch of the last batch the fetcher has (v12+; -1: not
	// sent): the diverging-epoch check.
	lastFetchedEpoch int32
	sp               *sessionPart // nil outside sessions
	// part is the partition a follower's fetch read (its sent HW is recorded).
	part *Partition

	errorCode          int16
	hw, lso, logStart  int64
	abortedTxns        []abortedTxn // nil = null (read_uncommitted)
	preferredReplica   int32
	divergingEpoch     int32
	divergingEndOffset int64
	leaderID           int32
	leaderEpoch        int32
	snapshotEndOffset  int64
	snapshotEpoch      int32
	records            kernel.ReadResult

	// Set by readOne: the partition read and its generation loaded before the read
	// (nil: none read), and whether the read left nothing below its bound unread.
	readPart *Partition
	readGen  uint64
	drained  bool
	// replThrottled: a follower's fetch of a leader-throttled replica out of the ISR;
	// its records count against leader.replication.throttled.rate (throttle.go).
	replThrottled bool
}

type abortedTxn struct{ producerID, firstOffset int64 }

// reset clears the result fields (before a re-read by a delayed fetch).
func (fp *fetchPart) reset() {
	fp.release()
	fp.part = nil
	fp.errorCode = 0
	fp.hw, fp.lso, fp.logStart = -1, -1, -1
	fp.abortedTxns = nil
	fp.preferredReplica = -1
	fp.divergingEpoch, fp.divergingEndOffset = -1, -1
	fp.leaderID, fp.leaderEpoch = -1, -1
	fp.snapshotEndOffset, fp.snapshotEpoch = -1, -1
	fp.readPart, fp.readGen, fp.drained = nil, 0, false
	fp.replThrottled = false
}

func (fp *fetchPart) release() {
	if fp.records.Release != nil {
		fp.records.Release()
	}
	fp.records = kernel.ReadResult{}
}

// piece is a stretch of the encoded bytes [start, end) or a records chunk.
type piece struct {
	start, end int
	chunk      *kernel.Chunk
}

type fetchEncoder struct {
	buf    []byte
	pieces []piece
	mark   int // start of the current byte stretch
	flex   bool
}

func (e *fetchEncoder) i16(v int16) { e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v)) }
func (e *fetchEncoder) i32(v int32) { e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(v)) }
func (e *fetchEncoder) i64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }
func (e *fetchEncoder) uvarint(v uint64) {
	e.buf = binary.AppendUvarint(e.buf, v)
}

func (e *fetchEncoder) arrayLen(n int) {
	if e.flex {
		e.uvarint(uint64(n) + 1)
	} else {
		e.i32(int32(n))
	}
}

func (e *fetchEncoder) nullableArrayLen(n int, null bool) {
	switch {
	case null && e.flex:
		e.uvarint(0)
	case null:
		e.i32(-1)
	default:
		e.arrayLen(n)
	}
}

func (e *fetchEncoder) str(s string) {
	if e.flex {
		e.uvarint(uint64(len(s)) + 1)
	} else {
		e.i16(int16(len(s)))
	}
	e.buf = append(e.buf, s...)
}

func (e *fetchEncoder) nullableStr(s *string) {
	if s != nil {
		e.str(*s)
	} else if e.flex {
		e.uvarint(0)
	} else {
		e.i16(-1)
	}
}

// cut ends the current byte stretch.
func (e *fetchEncoder) cut() {
	if len(e.buf) > e.mark {
		e.pieces = append(e.pieces, piece{start: e.mark, end: len(e.buf)})
	}
	e.mark = len(e.buf)
}

// encodeFetch encodes r as a kernel.Body. The body's Release releases every
// partition's records.
func encodeFetch(r *fetchResponse) *kernel.Body {
	v := r.version
	e := fetchEncoder{flex: v >= 12}
	nparts, nchunks := 0, 0
	for i := range r.topics {
		nparts += len(r.topics[i].parts)
		for _, fp := range r.topics[i].parts {
			nchunks += len(fp.records.Chunks)
		}
	}
	e.buf = make([]byte, 0, 32+len(r.topics)*32+nparts*96)
	e.pieces = make([]piece, 0, 2*nchunks+1)

	if v >= 1 {
		e.i32(r.throttle)
	}
	if v >= 7 {
		e.i16(r.errorCode)
		e.i32(r.sessionID)
	}
	e.arrayLen(len(r.topics))
	for i := range r.topics {
		t := &r.topics[i]
		if v >= 13 {
			e.buf = append(e.buf, t.id[:]...)
		} else {
			e.str(t.name)
		}
		e.arrayLen(len(t.parts))
		for _, fp := range t.parts {
			e.i32(fp.partition)
			e.i16(fp.errorCode)
			e.i64(fp.hw)
			if v >= 4 {
				e.i64(fp.lso)
			}
			if v >= 5 {
				e.i64(fp.logStart)
			}
			if v >= 4 {
				e.nullableArrayLen(len(fp.abortedTxns), fp.abortedTxns == nil)
				for _, a := range fp.abortedTxns {
					e.i64(a.producerID)
					e.i64(a.firstOffset)
					if e.flex {
						e.uvarint(0)
					}
				}
			}
			if v >= 11 {
				e.i32(fp.preferredReplica)
			}
			// records: never null (Kafka sends empty records when there are none)
			n := fp.records.Size
			if e.flex {
				e.uvarint(uint64(n) + 1)
			} else {
				e.i32(int32(n))
			}
			if n > 0 {
				e.cut()
				for c := range fp.records.Chunks {
					e.pieces = append(e.pieces, piece{chunk: &fp.records.Chunks[c]})
				}
			}
			if e.flex {
				e.partitionTags(fp)
			}
		}
		if e.flex {
			e.uvarint(0)
		}
	}
	if e.flex {
		if v >= 16 && len(r.endpoints) > 0 {
			e.uvarint(1) // one tag
			e.uvarint(0) // tag 0: node_endpoints
			var sub fetchEncoder
			sub.flex = true
			sub.arrayLen(len(r.endpoints))
			for _, ne := range r.endpoints {
				sub.i32(ne.nodeID)
				sub.str(ne.host)
				sub.i32(ne.port)
				sub.nullableStr(ne.rack)
				sub.uvarint(0)
			}
			e.uvarint(uint64(len(sub.buf)))
			e.buf = append(e.buf, sub.buf...)
		} else {
			e.uvarint(0)
		}
	}
	e.cut()

	body := &kernel.Body{Chunks: make([]kernel.Chunk, 0, len(e.pieces))}
	for _, pc := range e.pieces {
		if pc.chunk != nil {
			body.Chunks = append(body.Chunks, *pc.chunk)
		} else {
			body.Chunks = append(body.Chunks, kernel.Chunk{Bytes: e.buf[pc.start:pc.end:pc.end]})
		}
	}
	// Fetch v1+ begins with throttle_time_ms: the kernel may raise it (request quota).
	body.ThrottleFirst = v >= 1 && len(e.pieces) > 0 && e.pieces[0].chunk == nil && e.pieces[0].start == 0
	body.Release = func() {
		for i := range r.topics {
			for _, fp := range r.topics[i].parts {
				fp.release()
			}
		}
	}
	return body
}

func (e *fetchEncoder) partitionTags(fp *fetchPart) {
	hasDiv := fp.divergingEpoch != -1 || fp.divergingEndOffset != -1
	hasLeader := fp.leaderID != -1 || fp.leaderEpoch != -1
	hasSnap := fp.snapshotEndOffset != -1 || fp.snapshotEpoch != -1
	n := 0
	for _, b := range []bool{hasDiv, hasLeader, hasSnap} {
		if b {
			n++
		}
	}
	e.uvarint(uint64(n))
	if hasDiv {
		e.uvarint(0)
		e.uvarint(13) // epoch int32 + end_offset int64 + empty tags
		e.i32(fp.divergingEpoch)
		e.i64(fp.divergingEndOffset)
		e.uvarint(0)
	}
	if hasLeader {
		e.uvarint(1)
		e.uvarint(9) // leader_id int32 + leader_epoch int32 + empty tags
		e.i32(fp.leaderID)
		e.i32(fp.leaderEpoch)
		e.uvarint(0)
	}
	if hasSnap {
		e.uvarint(2)
		e.uvarint(13) // end_offset int64 + epoch int32 + empty tags
		e.i64(fp.snapshotEndOffset)
		e.i32(fp.snapshotEpoch)
		e.uvarint(0)
	}
}
