package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// fetchOp is one Fetch request being served: the partitions to read in order (from the
// request, or from its session) and the session bookkeeping.
type fetchOp struct {
	ctx           context.Context
	m             *Module
	req           *kernel.Request
	version       int16
	image         *kernel.Image
	parts         []*fetchPart
	maxBytes      int64
	minBytes      int64
	readCommitted bool
	// replica is the fetching follower's broker id (-1: a consumer). Follower fetches
	// need CLUSTER_ACTION (clusterOK), read up to the log end and report the
	// follower's log end offset to the partition.
	replica   int32
	clusterOK bool
	// hwNews: a partition's HW is past the one last sent to the follower (readAll
	// sets it): the answer goes out at once.
	hwNews bool
	// rack is a consumer's client.rack (v11+, follower reads only; "" otherwise).
	rack        string
	authz       map[string]bool // topics authorized so far, past the last one
	lastTopic   string
	lastAllowed bool
	lastSet     bool

	session     *fetchSession
	incremental bool
	// arena is the chunk the next fetchPart of op.parts is allocated from (newPart).
	arena []fetchPart
	// quiet are the session partitions left out of the read (session.go).
	quiet    []quietPart
	abortBuf []kernel.AbortedTxn // reused by abortedFor
}

// fetch serves one Fetch request and returns its encoded body.
func (m *Module) fetch(ctx context.Context, req *kernel.Request, r *kmsg.FetchRequest) (*kernel.Body, time.Duration, error) {
	op := &fetchOp{
		ctx:           ctx,
		m:             m,
		req:           req,
		version:       req.Version,
		image:         m.meta.Image(),
		maxBytes:      int64(r.MaxBytes),
		minBytes:      int64(r.MinBytes),
		readCommitted: r.IsolationLevel == 1,
	}
	op.maxBytes = min(max(op.maxBytes, 0), m.fetchMaxBytes.Load())
	op.replica = r.ReplicaID
	if req.Version >= 15 {
		op.replica = r.ReplicaState.ID
	}
	if op.replica >= 0 {
		// As Kafka: a follower's fetch needs CLUSTER_ACTION on the cluster (and no
		// READ on the topics); without it every partition is refused.
		op.clusterOK = req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName)
		op.readCommitted = false
	} else if op.replica < -1 {
		op.replica = -1 // a debugging replica id reads like a consumer
	}
	if op.replica < 0 && m.FollowerReads && req.Version >= 11 {
		op.rack = r.Rack
	}

	resp := &fetchResponse{version: req.Version}
	if code := op.resolveSession(r); code != 0 {
		resp.errorCode = code
		return encodeFetch(resp), 0, nil
	}
	if op.session != nil {
		resp.sessionID = op.session.id
	}
	// consumer_byte_rate: a consumer already over its quota reads nothing this time
	// (Kafka's throttled fetch response); the session saw this request, so its next
	// fetch carries on where this one would have.
	var client kernel.QuotaClient
	quota := m.quotas != nil && op.replica < 0
	if quota {
		client = kernel.QuotaClientOf(req)
		if t := m.quotas.FetchThrottle(client, m.now()); t > 0 {
			resp.throttle = throttleMillis(t)
			return encodeFetch(resp), t, nil
		}
	}

	total, stop := op.readAll()
	if !stop && r.MaxWaitMillis > 0 && total < op.minBytes && len(op.parts)+len(op.quiet) > 0 {
		op.releaseAll()
		waitStart := time.Now()
		defer func() { kernel.NoteWait(ctx, time.Since(waitStart)) }() // the long poll is not work
		done, err := m.pg.wait(ctx, op.waitKeys(), time.Duration(r.MaxWaitMillis)*time.Millisecond, func() bool {
			op.wakeQuiet()
			total, stop := op.readAll()
			if stop || total >= op.minBytes {
				return true
			}
			op.releaseAll()
			return false
		})
		if err != nil && !errors.Is(err, errStopped) {
			op.releaseAll()
			return nil, 0, err // the connection is going away
		}
		if !done {
			op.readAll()
		}
	}
	if op.replica >= 0 {
		var throttled int64
		for _, fp := range op.parts {
			if fp.replThrottled {
				throttled += fp.records.Size
			}
		}
		m.rthrottle.record(leaderSide, m.rcfg.Load(), throttled, m.now())
	}
	sent := op.finish(resp)
	if op.replica >= 0 {
		for _, fp := range op.parts {
			if fp.part != nil && fp.errorCode == 0 && fp.hw >= 0 {
				fp.part.sentHW(op.replica, fp.hw)
			}
		}
	}
	var throttle time.Duration
	if quota {
		throttle = m.quotas.FetchRecord(client, sent, m.now())
		resp.throttle = throttleMillis(throttle)
	}
	body := encodeFetch(resp)
	return body, throttle, nil
}

// resolveSession applies KIP-227 to the request and fills op.parts. It returns a
// top-level error code (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) or 0.
func (op *fetchOp) resolveSession(r *kmsg.FetchRequest) int16 {
	c := op.m.sessions
	epoch, id := r.SessionEpoch, r.SessionID
	if op.version < 7 {
		epoch, id = sessionEpochFinal, 0
	}
	switch {
	case epoch == sessionEpochFinal:
		if id != 0 {
			c.remove(id)
		}
		op.fromRequest(r, nil)
		return 0
	case epoch == sessionEpochInitial:
		if id != 0 {
			c.remove(id)
		}
		n := 0
		for i := range r.Topics {
			n += len(r.Topics[i].Partitions)
		}
		s := c.create(n)
		if s != nil {
			s.mu.Lock()
			defer s.mu.Unlock()
		}
		op.fromRequest(r, s)
		op.session = s
		return 0
	}
	s := c.get(id)
	if s == nil {
		return kerr.FetchSessionIDNotFound.Code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return kerr.FetchSessionIDNotFound.Code
	}
	if s.nextEpoch != epoch {
		return kerr.InvalidFetchSessionEpoch.Code
	}
	s.nextEpoch++
	if s.nextEpoch <= 0 {
		s.nextEpoch = 1
	}
	s.lastUsed = c.now()
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			s.upsert(op.key(t.Topic, t.TopicID, rp.Partition), rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch)
		}
	}
	for i := range r.ForgottenTopics {
		ft := &r.ForgottenTopics[i]
		for _, p := range ft.Partitions {
			s.forget(op.key(ft.Topic, ft.TopicID, p))
		}
	}
	op.session = s
	op.incremental = true
	op.parts = make([]*fetchPart, 0, len(s.parts))
	quietOK := op.replica < 0 && op.rack == ""
	now := c.now().UnixNano()
	for _, sp := range s.parts {
		if q := sp.qPart; q != nil && quietOK && now < sp.qUntil && sp.qCommitted == op.readCommitted &&
			q.gen.Load() == sp.qGen && op.allowed(sp.qTopic) {
			// Unchanged since the read that found it quiet (session.go). The topic
			// still exists under that read's name: a deletion closes the partition,
			// which bumps gen.
			op.quiet = append(op.quiet, quietPart{sp: sp, part: q, gen: sp.qGen, topic: sp.qTopic,
				fetchOffset: sp.fetchOffset, maxBytes: sp.maxBytes, currentEpoch: sp.currentEpoch, lastFetched: sp.lastFetchedEpoch})
			continue
		}
		op.newPart(sp.key.topic, sp.key.topicID, sp.key.partition, sp.fetchOffset, sp.maxBytes, sp.currentEpoch, sp.lastFetchedEpoch).sp = sp
	}
	return 0
}

// wakeQuiet moves the quiet partitions whose generation changed into the read (at the
// end of the fetch order).
func (op *fetchOp) wakeQuiet() {
	kept := op.quiet[:0]
	for i := range op.quiet {
		q := &op.quiet[i]
		if q.part.gen.Load() == q.gen {
			kept = append(kept, *q)
			continue
		}
		// Resolved from the session key as any read is: the change may be the topic's
		// deletion, and a topic of the same name since is another incarnation.
		k := q.sp.key
		op.newPart(k.topic, k.topicID, k.partition, q.fetchOffset, q.maxBytes, q.currentEpoch, q.lastFetched).sp = q.sp
	}
	clear(op.quiet[len(kept):])
	op.quiet = kept
}

// waitKeys returns the purgatory keys of the fetch: its partitions, quiet ones included.
func (op *fetchOp) waitKeys() []kernel.TopicPartition {
	keys := make([]kernel.TopicPartition, 0, len(op.parts)+len(op.quiet))
	for _, fp := range op.parts {
		if fp.topic != "" {
			keys = append(keys, kernel.TopicPartition{Topic: fp.topic, Partition: fp.partition})
		}
	}
	for i := range op.quiet {
		keys = append(keys, kernel.TopicPartition{Topic: op.quiet[i].topic, Partition: op.quiet[i].sp.key.partition})
	}
	return keys
}

func (op *fetchOp) key(topic string, id [16]byte, p int32) sessionKey {
	if op.version >= 13 {
		return sessionKey{topicID: id, partition: p}
	}
	return sessionKey{topic: topic, partition: p}
}

// fromRequest takes the partitions of a full fetch, adding them to s if not nil (s.mu
// held).
func (op *fetchOp) fromRequest(r *kmsg.FetchRequest, s *fetchSession) {
	n := 0
	for i := range r.Topics {
		n += len(r.Topics[i].Partitions)
	}
	op.parts = make([]*fetchPart, 0, n)
	op.arena = make([]fetchPart, 0, n)
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			fp := op.newPart(t.Topic, t.TopicID, rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch)
			if s != nil {
				k := op.key(t.Topic, t.TopicID, rp.Partition)
				s.upsert(k, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch)
				fp.sp = s.index[k]
			}
		}
	}
}

// fetchPartChunk is how many fetchParts an incremental fetch allocates at once: most
// of a big session's partitions are quiet and need none.
const fetchPartChunk = 32

// newPart adds a partition to read; the topic name is resolved from the ID for v13+.
func (op *fetchOp) newPart(topic string, id [16]byte, partition int32, offset int64, maxBytes, curEpoch, lastFetchedEpoch int32) *fetchPart {
	if op.version >= 13 {
		topic = ""
		if t := op.image.TopicByID(id); t != nil {
			topic = t.Name
		}
	} else if t := op.image.Topic(topic); t != nil {
		id = t.ID
	}
	if op.version < 12 {
		lastFetchedEpoch = -1
	}
	// The request's partitions are allocated in chunks: appending within a chunk's
	// capacity never moves the parts already handed out.
	if len(op.arena) == cap(op.arena) {
		op.arena = make([]fetchPart, 0, fetchPartChunk)
	}
	op.arena = append(op.arena, fetchPart{topic: topic, topicID: id, partition: partition, fetchOffset: offset, maxBytes: maxBytes, curEpoch: curEpoch, lastFetchedEpoch: lastFetchedEpoch})
	fp := &op.arena[len(op.arena)-1]
	fp.reset()
	op.parts = append(op.parts, fp)
	return fp
}

// allowed answers READ on a topic, once per topic per request. Partitions of a topic
// are usually consecutive, so the last answer is kept outside the map.
func (op *fetchOp) allowed(topic string) bool {
	if op.lastSet && topic == op.lastTopic {
		return op.lastAllowed
	}
	if op.lastSet {
		if op.authz == nil {
			op.authz = make(map[string]bool, 2)
		}
		op.authz[op.lastTopic] = op.lastAllowed
	}
	ok, seen := op.authz[topic]
	if !seen {
		ok = op.req.Allowed(op.ctx, kernel.OpRead, kernel.ResTopic, topic)
	}
	op.lastTopic, op.lastAllowed, op.lastSet = topic, ok, true
	return ok
}

// readAll reads every partition in order within the response's max_bytes, with the
// at-least-one-batch rule for the first partition that has data (KIP-74). It returns
// the record bytes read, and stop = some partition has an error (respond at once).
func (op *fetchOp) readAll() (total int64, stop bool) {
	limit := op.maxBytes
	minOne := true
	op.hwNews = false
	for _, fp := range op.parts {
		fp.reset()
		op.readOne(fp, limit, minOne)
		if fp.errorCode != 0 || fp.divergingEpoch != -1 || fp.divergingEndOffset != -1 || fp.preferredReplica >= 0 || op.hwNews {
			stop = true
		}
		if n := fp.records.Size; n > 0 {
			minOne = false
			total += n
			limit = max(0, limit-n)
		}
	}
	return total, stop
}

func (op *fetchOp) readOne(fp *fetchPart, limit int64, minOne bool) {
	if fp.topic == "" {
		if op.version >= 13 {
			fp.errorCode = kerr.UnknownTopicID.Code
		} else {
			fp.errorCode = kerr.UnknownTopicOrPartition.Code
		}
		return
	}
	if op.replica >= 0 && !op.clusterOK || op.replica < 0 && !op.allowed(fp.topic) {
		fp.errorCode = kerr.TopicAuthorizationFailed.Code
		return
	}
	tp := kernel.TopicPartition{Topic: fp.topic, Partition: fp.partition}
	p := op.m.partition(tp)
	if p != nil && op.version >= 13 && p.topicID != fp.topicID {
		// Another incarnation under the name the request's image gave the ID (a
		// delayed fetch woken by the topic's deletion and re-creation).
		fp.errorCode = kerr.UnknownTopicID.Code
		return
	}
	if p != nil {
		// Loaded before anything of p is read (Partition.gen's invariant).
		fp.readPart, fp.readGen = p, p.gen.Load()
	}
	if p == nil && op.m.openFailed(tp) {
		fp.errorCode = kerr.KafkaStorageError.Code
		return
	}
	if p == nil {
		if pi := op.image.Partition(fp.topic, fp.partition); pi != nil {
			fp.errorCode = kerr.NotLeaderForPartition.Code
			fp.leaderID, fp.leaderEpoch = pi.Leader, pi.LeaderEpoch
			return
		}
		fp.errorCode = kerr.UnknownTopicOrPartition.Code
		return
	}
	pl, err := p.leaderFor(fp.curEpoch)
	follower := false
	if errors.Is(err, ErrNotLeader) && op.replica < 0 && op.m.FollowerReads && pl.leader >= 0 && slices.Contains(pl.replicas, p.self) {
		// A follower read (KIP-392): served up to this follower's HW.
		follower, err = true, checkEpoch(pl, fp.curEpoch)
	}
	if err != nil {
		fp.errorCode = errorCode(err)
		if op.version >= 12 {
			fp.leaderID, fp.leaderEpoch = pl.leader, pl.epoch
		}
		return
	}
	// The log end before the read: a follower fetching from it was caught up at this
	// moment, whatever is appended meanwhile (Kafka's rule).
	leo := p.log.LogEndOffset()
	fp.logStart = p.log.LogStartOffset()
	if fp.lastFetchedEpoch >= 0 && op.diverging(fp, p) {
		fp.hw, fp.lso = p.stableOffsets()
		return
	}
	if fp.fetchOffset < fp.logStart || fp.fetchOffset > leo {
		fp.hw, fp.lso = p.stableOffsets()
		fp.errorCode = kerr.OffsetOutOfRange.Code
		return
	}
	if op.rack != "" && !follower {
		if r := p.preferredReadReplica(op.image, op.rack, fp.fetchOffset); r >= 0 {
			// As Kafka: the answer names the replica and carries no records.
			fp.preferredReplica = r
			fp.hw, fp.lso = p.stableOffsets()
			return
		}
	}
	if op.replica >= 0 {
		// The follower has everything below its fetch offset: record it (the HW may
		// move, waking acks=all produces) before the HW for the answer is loaded.
		prop, hwNews, known := p.followerFetched(op.replica, fp.fetchOffset, leo, op.m.now().UnixMilli())
		if prop != nil {
			op.m.proposeISR(p, prop)
		}
		if hwNews {
			op.hwNews = true
		}
		fp.part = p
		if !known {
			// Not one of the partition's replicas (a stale assignment): as Kafka, an
			// empty answer; the fetcher moves on when its image catches up.
			fp.hw, fp.lso = p.stableOffsets()
			return
		}
		if pl.leaderThrottled && !slices.Contains(pl.isr, op.replica) {
			// A throttled replica catching up (throttle.go): no records while the
			// leader's throttled rate is over leader.replication.throttled.rate.
			fp.replThrottled = true
			if op.m.rthrottle.over(leaderSide, op.m.rcfg.Load(), op.m.now()) > 0 {
				fp.hw, fp.lso = p.stableOffsets()
				return
			}
		}
	}
	hw, lso := p.stableOffsets()
	fp.hw, fp.lso = hw, lso
	// Consumers read up to the HW; read_committed reads stop at the LSO (a batch
	// boundary: the first batch of the earliest open transaction, or the HW); a
	// follower reads up to the log end (as of before the read).
	bound := hw
	switch {
	case op.replica >= 0:
		bound = leo
	case op.readCommitted:
		bound = lso
		fp.abortedTxns = []abortedTxn{} // non-null (zero-size: no allocation)
	}
	maxBytes := min(int64(fp.maxBytes), limit)
	if fp.fetchOffset >= bound {
		fp.drained = true
		return
	}
	if maxBytes <= 0 && !minOne {
		return
	}
	res, err := p.log.Read(fp.fetchOffset, max(maxBytes, 0), bound, minOne)
	if err != nil {
		fp.errorCode = op.m.storageCode(p, tp, "fetch read", err)
		return
	}
	fp.records = res
	if op.readCommitted && res.Size > 0 {
		op.abortedFor(fp, p, bound)
	}
}

// diverging checks a fetcher's LastFetchedEpoch (v12+; followers and consumers alike,
// as Kafka) against the log's leader-epoch cache. It reports true when fp is answered
// by it: with a diverging epoch (the largest epoch <= the fetcher's and its end offset
// here) when the fetcher's log has records this log does not (our epoch is older than
// its last fetched one, or that epoch ends here before its fetch offset): it must
// truncate before it fetches again; or OFFSET_OUT_OF_RANGE when the epoch's end is
// unknown or the fetch offset is below the log start. A log that keeps no epochs (none
// recorded) is not checked.
func (op *fetchOp) diverging(fp *fetchPart, p *Partition) bool {
	epoch, end := p.log.EndOffsetForEpoch(fp.lastFetchedEpoch)
	switch {
	case epoch < 0 || end < 0:
		if len(p.log.Epochs()) == 0 {
			return false
		}
		fp.errorCode = kerr.OffsetOutOfRange.Code
		return true
	case fp.fetchOffset < fp.logStart:
		fp.errorCode = kerr.OffsetOutOfRange.Code
		return true
	case epoch < fp.lastFetchedEpoch || end < fp.fetchOffset:
		fp.divergingEpoch, fp.divergingEndOffset = epoch, end
		return true
	}
	return false
}

// abortedFor fills fp's aborted transactions: those overlapping [fetchOffset, upper)
// where upper is the offset after the last batch read. The log is asked for
// [fetchOffset, lso) first (usually empty: no header is read then); only when that
// finds some are the read's batch headers walked to narrow it to upper.
func (op *fetchOp) abortedFor(fp *fetchPart, p *Partition, lso int64) {
	txns := p.log.AbortedTxns(op.abortBuf[:0], fp.fetchOffset, lso)
	op.abortBuf = txns
	if len(txns) == 0 {
		return
	}
	upper := lso
	if last, ok := lastOffsetOf(&fp.records); ok {
		upper = min(upper, last+1)
	}
	for _, a := range txns {
		if a.FirstOffset < upper {
			fp.abortedTxns = append(fp.abortedTxns, abortedTxn{producerID: a.ProducerID, firstOffset: a.FirstOffset})
		}
	}
}

// lastOffsetOf returns the last offset of the last batch in rr, reading only batch
// header prefixes (from the file for file chunks). ok is false when rr holds no whole
// header (then the caller keeps its wider bound, which is still correct: a client
// ignores aborted transactions that start past its data).
func lastOffsetOf(rr *kernel.ReadResult) (int64, bool) {
	var hdr [recordbatch.OffLastOffsetDelta + 4]byte
	last, ok := int64(-1), false
	for i := range rr.Chunks {
		c := &rr.Chunks[i]
		n := c.Len()
		for pos := int64(0); pos+int64(len(hdr)) <= n; {
			if c.File == nil {
				copy(hdr[:], c.Bytes[pos:])
			} else if _, err := c.File.ReadAt(hdr[:], c.Off+pos); err != nil {
				return last, ok
			}
			size := int64(int32(binary.BigEndian.Uint32(hdr[recordbatch.OffBatchLength:])))
			if size < recordbatch.HeaderSize-recordbatch.LogOverhead {
				return last, ok
			}
			last = int64(binary.BigEndian.Uint64(hdr[recordbatch.OffBaseOffset:])) + int64(int32(binary.BigEndian.Uint32(hdr[recordbatch.OffLastOffsetDelta:])))
			ok = true
			pos += size + recordbatch.LogOverhead
		}
	}
	return last, ok
}

func (op *fetchOp) releaseAll() {
	for _, fp := range op.parts {
		fp.release()
	}
}

// finish builds the response from the partitions read: all of them for a full fetch,
// only the changed ones for an incremental fetch. Session state is updated here, once.
func (op *fetchOp) finish(resp *fetchResponse) (bytes int64) {
	var sent []*fetchPart
	if s := op.session; s != nil {
		s.mu.Lock()
		var gotData map[*sessionPart]bool
		sent = op.parts[:0:0]
		for _, fp := range op.parts {
			sp := fp.sp
			changed := fp.errorCode != 0 || fp.records.Size > 0 || fp.preferredReplica >= 0 || fp.divergingEpoch != -1 || fp.divergingEndOffset != -1 ||
				sp.hw != fp.hw || sp.lso != fp.lso || sp.logStart != fp.logStart
			sp.hw, sp.lso, sp.logStart = fp.hw, fp.lso, fp.logStart
			op.markQuiet(fp, sp)
			if fp.records.Size > 0 {
				if gotData == nil {
					gotData = map[*sessionPart]bool{}
				}
				gotData[sp] = true
			}
			if changed || !op.incremental {
				sent = append(sent, fp)
			} else {
				fp.release()
			}
		}
		s.rotate(gotData)
		s.lastUsed = op.m.sessions.now()
		s.mu.Unlock()
	} else {
		sent = op.parts
	}
	for _, fp := range sent {
		bytes += fp.records.Size
		if op.replica < 0 && fp.readPart != nil {
			fp.readPart.stats.out(fp.records.Size, max(fp.records.NextOffset-fp.fetchOffset, 0))
		}
		n := len(resp.topics)
		if n == 0 || resp.topics[n-1].name != fp.topic || resp.topics[n-1].id != fp.topicID {
			resp.topics = append(resp.topics, fetchTopic{name: fp.topic, id: fp.topicID})
			n++
		}
		resp.topics[n-1].parts = append(resp.topics[n-1].parts, fp)
		if fp.errorCode == kerr.NotLeaderForPartition.Code && fp.leaderID >= 0 && op.version >= 16 {
			resp.endpoints = op.m.addEndpoint(resp.endpoints, op.image, fp.leaderID, op.req)
		}
	}
	op.m.fetchBytes.Add(bytes)
	return bytes
}

// markQuiet records (s.mu held) whether fp's read left the session partition sp quiet:
// a consumer's read of a hosted partition that found no error, nothing to send and
// nothing unread below its bound, with the parameters sp still holds (a later request
// on the same session may have changed them meanwhile).
func (op *fetchOp) markQuiet(fp *fetchPart, sp *sessionPart) {
	switch {
	case op.replica >= 0 || op.rack != "" || fp.readPart == nil || !fp.drained || fp.errorCode != 0 ||
		fp.records.Size > 0 || fp.preferredReplica >= 0 || fp.divergingEpoch != -1 || fp.divergingEndOffset != -1 ||
		sp.fetchOffset != fp.fetchOffset || sp.maxBytes != fp.maxBytes || sp.currentEpoch != fp.curEpoch:
		sp.qPart = nil
		return
	}
	sp.qPart, sp.qGen, sp.qCommitted, sp.qTopic = fp.readPart, fp.readGen, op.readCommitted, fp.topic
	sp.qUntil = op.m.sessions.now().Add(quietMaxAge).UnixNano()
}

// addEndpoint appends the listener of node id matching the request's listener, once.
func (m *Module) addEndpoint(eps []nodeEndpoint, im *kernel.Image, id int32, req *kernel.Request) []nodeEndpoint {
	for _, e := range eps {
		if e.nodeID == id {
			return eps
		}
	}
	b := im.Brokers[id]
	if b == nil {
		return eps
	}
	for _, l := range b.Endpoints {
		if req.Conn == nil || l.Name == req.Conn.Listener {
			var rack *string
			if b.Rack != "" {
				r := b.Rack
				rack = &r
			}
			return append(eps, nodeEndpoint{nodeID: id, host: l.Host, port: l.Port, rack: rack})
		}
	}
	return eps
}
