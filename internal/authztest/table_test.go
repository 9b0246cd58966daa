package authztest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// Names of what the fixture creates.
const (
	topicT  = "t"   // 1 partition, 3 records
	topicT2 = "t2"  // 1 partition, empty; in no transaction
	groupG  = "g"   // committed offset 1 on t/0
	groupCG = "cg"  // a KIP-848 group: one member subscribed to t
	txnTX   = "tx"  // an ongoing transaction on t
	newT    = "new" // never created by a denied row
)

// fixture is one broker with the recorder, a client that talks to it directly, and
// the state rows read and must not change.
type fixture struct {
	b       *testbroker.Broker
	rec     *recorder
	cl      *kgo.Client
	adm     *kadm.Client
	node    int32
	topicID [16]byte // of t
	t2ID    [16]byte
	pid     int64 // tx's producer
	epoch   int16
}

// clientFor is the client for requests of key: f.cl, or when maxV >= 0 a new client
// limited to maxV of key. Call it before denying anything: a new client's first
// Metadata request is asked about too.
func (f *fixture) clientFor(t *testing.T, key kmsg.Key, maxV int16) *kgo.Client {
	t.Helper()
	if maxV < 0 {
		return f.cl
	}
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key.Int16(), maxV)
	cl := f.b.Client(t, kgo.MaxVersions(vs))
	if _, err := cl.Request(context.Background(), kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("metadata: %v", err)
	}
	return cl
}

// sendWith issues req to the broker itself with cl (no sharding, no metadata lookups of
// kgo's own).
func (f *fixture) sendWith(t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := cl.Broker(int(f.node)).Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// send issues req with f.cl, or a client limited to maxV of its key (maxV >= 0).
func (f *fixture) send(t *testing.T, req kmsg.Request, maxV int16) kmsg.Response {
	t.Helper()
	return f.sendWith(t, f.clientFor(t, kmsg.Key(req.Key()), maxV), req)
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{rec: &recorder{}}
	f.rec.set()
	// One __transaction_state partition: the coordinator loads the partitions it
	// leads in the background, and while any is loading ListTransactions answers
	// COORDINATOR_LOAD_IN_PROGRESS with an empty list (as Kafka does), which the rows
	// would read as tx gone. With one, tx's own load is the only one.
	f.b = testbroker.Start(t, testbroker.WithModules(f.rec.info()), testbroker.WithConfig(`
configs:
  transaction.state.log.num.partitions: "1"
modules:
  auth: {use: recorder}
`))
	f.cl = f.b.Client(t)
	f.adm = kadm.NewClient(f.cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	md, err := f.cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	f.node = md.(*kmsg.MetadataResponse).Brokers[0].NodeID

	for _, name := range []string{topicT, topicT2} {
		if _, err := f.adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	tds, err := f.adm.ListTopics(ctx, topicT, topicT2)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	f.topicID, f.t2ID = tds[topicT].ID, tds[topicT2].ID

	prod := f.b.Client(t, kgo.DefaultProduceTopic(topicT))
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topicT, Partition: 0, At: 1, LeaderEpoch: -1})
	if r, err := f.adm.CommitOffsets(ctx, groupG, offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	// An ongoing transaction: tx has produced to t and nothing else.
	txcl := f.b.Client(t, kgo.TransactionalID(txnTX), kgo.DefaultProduceTopic(topicT),
		kgo.TransactionTimeout(10*time.Minute))
	if err := txcl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txcl.ProduceSync(ctx, &kgo.Record{Value: []byte("in-txn")}).FirstErr(); err != nil {
		t.Fatalf("txn produce: %v", err)
	}
	if f.pid, f.epoch, err = txcl.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	testbroker.WaitFor(t, 30*time.Second, "the transaction coordinator loaded", func() string {
		r := f.send(t, kmsg.NewPtrListTransactionsRequest(), -1).(*kmsg.ListTransactionsResponse)
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return err.Error()
		}
		return ""
	})

	// A KIP-848 group with one member subscribed to t.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch = groupCG, "m-authztest-0000000001", 0
	hb.RebalanceTimeoutMillis = 60000
	hb.SubscribedTopicNames = []string{topicT}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	testbroker.WaitFor(t, 30*time.Second, "the consumer group's first heartbeat", func() string {
		r := f.send(t, hb, -1).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			return kerr.ErrorForCode(r.ErrorCode).Error()
		}
		return ""
	})
	f.rec.set()
	return f
}

// State the rows assert unchanged.

func (f *fixture) endOffset(t *testing.T, topic string) int64 {
	t.Helper()
	o, err := f.adm.ListEndOffsets(context.Background(), topic)
	if err != nil || o.Error() != nil {
		t.Fatalf("end offsets: %v %v", err, o.Error())
	}
	l, _ := o.Lookup(topic, 0)
	return l.Offset
}

func (f *fixture) startOffset(t *testing.T, topic string) int64 {
	t.Helper()
	o, err := f.adm.ListStartOffsets(context.Background(), topic)
	if err != nil || o.Error() != nil {
		t.Fatalf("start offsets: %v %v", err, o.Error())
	}
	l, _ := o.Lookup(topic, 0)
	return l.Offset
}

func (f *fixture) topicExists(t *testing.T, name string) bool {
	t.Helper()
	tds, err := f.adm.ListTopics(context.Background())
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	return tds.Has(name)
}

func (f *fixture) partitions(t *testing.T, name string) int {
	t.Helper()
	tds, err := f.adm.ListTopics(context.Background(), name)
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	return len(tds[name].Partitions)
}

func (f *fixture) committed(t *testing.T, g string) int64 {
	t.Helper()
	o, err := f.adm.FetchOffsets(context.Background(), g)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	r, ok := o.Lookup(topicT, 0)
	if !ok {
		return -1
	}
	return r.At
}

func (f *fixture) topicConfig(t *testing.T, name, key string) string {
	t.Helper()
	rcs, err := f.adm.DescribeTopicConfigs(context.Background(), name)
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	rc, err := rcs.On(name, nil)
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	return ""
}

func (f *fixture) describeCfg(t *testing.T, typ kmsg.ConfigResourceType, name, key string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	req.Resources = append(req.Resources, res)
	resp := f.send(t, req, -1).(*kmsg.DescribeConfigsResponse)
	for _, c := range resp.Resources[0].Configs {
		if c.Name == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}

// txnState is tx's state and its partitions' topics, read with DescribeTransactions.
func (f *fixture) txnState(t *testing.T) (string, []string) {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{txnTX}
	resp := f.send(t, req, -1).(*kmsg.DescribeTransactionsResponse)
	st := resp.TransactionStates[0]
	var topics []string
	for _, tp := range st.Topics {
		topics = append(topics, tp.Topic)
	}
	slices.Sort(topics)
	return st.State, topics
}

func (f *fixture) groups(t *testing.T) []string {
	t.Helper()
	resp := f.send(t, kmsg.NewPtrListGroupsRequest(), -1).(*kmsg.ListGroupsResponse)
	var out []string
	for _, g := range resp.Groups {
		out = append(out, g.Group)
	}
	return out
}

// row is one line of docs/security.md's table: an API, the checks it denies, and what
// the answer and the broker's state must then be.
type row struct {
	name string
	key  kmsg.Key
	deny []check
	// maxV limits the request's version (-1: the newest both sides speak).
	maxV int16
	req  func(f *fixture) kmsg.Request
	// verify fails the test unless resp is the denial's answer: an error code, or
	// for rows whose denial filters rather than fails, what is left out.
	verify func(t *testing.T, f *fixture, resp kmsg.Response)
	// state snapshots what must not change; it is called before and after.
	state func(t *testing.T, f *fixture) any
	// mayNotAsk: the denied checks need not all be asked (an earlier check that
	// allowed settles the answer).
	mayNotAsk bool
	// denied and codes, for rows whose answer is codes: the denial's code and where
	// the response carries codes. A row that changes nothing when allowed either
	// (state nil) is also sent with everything allowed, and must then get no code
	// of the denial.
	denied *kerr.Error
	codes  func(kmsg.Response) []int16
	// asksNothing: the API takes no ACL (as in Kafka); the row checks no question is
	// asked at all.
	asksNothing bool
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != want.Code {
		t.Errorf("%s: code %d (%v), want %d (%s)", what, got, kerr.ErrorForCode(got), want.Code, want.Message)
	}
}

func strp(s string) *string { return &s }

// txnBatch is one transactional record batch of tx's producer.
func (f *fixture) txnBatch() []byte {
	return recordbatch.Build(recordbatch.Options{Transactional: true, ProducerID: f.pid, ProducerEpoch: f.epoch,
		BaseSequence: 100, BaseTimestamp: time.Now().UnixMilli()}, recordbatch.Record{Value: []byte("denied")})
}

func plainBatch() []byte {
	return recordbatch.Build(recordbatch.Options{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: time.Now().UnixMilli()}, recordbatch.Record{Value: []byte("denied")})
}

func produceReq(f *fixture, txn *string, batch []byte) kmsg.Request {
	r := kmsg.NewPtrProduceRequest()
	r.Acks, r.TimeoutMillis, r.TransactionID = -1, 5000, txn
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topicT, f.topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func produceCodes(resp kmsg.Response) []int16 {
	var out []int16
	for _, t := range resp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func allCodes(t *testing.T, what string, codes []int16, want *kerr.Error) {
	t.Helper()
	if len(codes) == 0 {
		t.Errorf("%s: no partitions answered", what)
	}
	for _, c := range codes {
		wantCode(t, what, c, want)
	}
}

func fetchReq(f *fixture, replica int32) kmsg.Request {
	r := kmsg.NewPtrFetchRequest()
	r.ReplicaID, r.ReplicaState.ID = replica, replica
	r.MaxWaitMillis, r.MaxBytes, r.SessionEpoch = 10, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topicT, f.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func fetchCodes(resp kmsg.Response) []int16 {
	var out []int16
	for _, t := range resp.(*kmsg.FetchResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func findCoordinatorCode(resp kmsg.Response) int16 {
	r := resp.(*kmsg.FindCoordinatorResponse)
	if r.Version < 4 {
		return r.ErrorCode
	}
	return r.Coordinators[0].ErrorCode
}

func offsetFetchReq(f *fixture, g string) kmsg.Request {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Group = g
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topicT, []int32{0}
	r.Topics = append(r.Topics, rt)
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = g
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.TopicID, gt.Partitions = topicT, f.topicID, []int32{0}
	rg.Topics = append(rg.Topics, gt)
	r.Groups = append(r.Groups, rg)
	return r
}

// offsetFetchCodes is the group's code and its partitions' codes, from either form.
func offsetFetchCodes(resp kmsg.Response) (int16, []int16) {
	r := resp.(*kmsg.OffsetFetchResponse)
	var parts []int16
	if r.Version < 8 {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, p.ErrorCode)
			}
		}
		return r.ErrorCode, parts
	}
	g := r.Groups[0]
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, p.ErrorCode)
		}
	}
	return g.ErrorCode, parts
}

func offsetCommitReq(f *fixture, g string, at int64) kmsg.Request {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Group, r.Generation, r.MemberID = g, -1, ""
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topicT, f.topicID
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset, rp.LeaderEpoch = at, -1
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func offsetCommitCodes(resp kmsg.Response) []int16 {
	var out []int16
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func txnOffsetCommitReq(f *fixture) kmsg.Request {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = txnTX, groupG, f.pid, f.epoch
	r.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topicT, f.topicID // v6 names it by id
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset, rp.LeaderEpoch = 2, -1
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func txnOffsetCommitCodes(resp kmsg.Response) []int16 {
	var out []int16
	for _, t := range resp.(*kmsg.TxnOffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func addPartitionsV3(f *fixture) kmsg.Request {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch = txnTX, f.pid, f.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topicT2, []int32{0}
	r.Topics = append(r.Topics, rt)
	return r
}

func addPartitionsV3Codes(resp kmsg.Response) []int16 {
	var out []int16
	for _, t := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

func configReq[R any](typ kmsg.ConfigResourceType, name, key, value string) kmsg.Request {
	var zero R
	switch any(zero).(type) {
	case kmsg.AlterConfigsRequest:
		r := kmsg.NewPtrAlterConfigsRequest()
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = key, strp(value)
		res.Configs = append(res.Configs, c)
		r.Resources = append(r.Resources, res)
		return r
	case kmsg.IncrementalAlterConfigsRequest:
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = key, strp(value), kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, c)
		r.Resources = append(r.Resources, res)
		return r
	}
	r := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = typ, name
	r.Resources = append(r.Resources, res)
	return r
}

func configCode(resp kmsg.Response) int16 {
	switch r := resp.(type) {
	case *kmsg.AlterConfigsResponse:
		return r.Resources[0].ErrorCode
	case *kmsg.IncrementalAlterConfigsResponse:
		return r.Resources[0].ErrorCode
	case *kmsg.DescribeConfigsResponse:
		return r.Resources[0].ErrorCode
	}
	return -1
}

// codeRow is a row whose answer is one code: got(resp) must be want.
func codeRow(name string, key kmsg.Key, deny []check, maxV int16, req func(*fixture) kmsg.Request,
	got func(kmsg.Response) int16, want *kerr.Error, state func(*testing.T, *fixture) any,
) row {
	return row{name: name, key: key, deny: deny, maxV: maxV, req: req, state: state, denied: want,
		codes:  func(resp kmsg.Response) []int16 { return []int16{got(resp)} },
		verify: func(t *testing.T, _ *fixture, resp kmsg.Response) { wantCode(t, name, got(resp), want) }}
}

// codesRow is a row whose answer is per-partition codes, all of which must be want.
func codesRow(name string, key kmsg.Key, deny []check, maxV int16, req func(*fixture) kmsg.Request,
	got func(kmsg.Response) []int16, want *kerr.Error, state func(*testing.T, *fixture) any,
) row {
	return row{name: name, key: key, deny: deny, maxV: maxV, req: req, state: state, denied: want, codes: got,
		verify: func(t *testing.T, _ *fixture, resp kmsg.Response) { allCodes(t, name, got(resp), want) }}
}

// State snapshots.
func endOfT(t *testing.T, f *fixture) any   { return f.endOffset(t, topicT) }
func startOfT(t *testing.T, f *fixture) any { return f.startOffset(t, topicT) }
func committedG(t *testing.T, f *fixture) any {
	return f.committed(t, groupG)
}

func txnOf(t *testing.T, f *fixture) any {
	st, topics := f.txnState(t)
	return append([]string{st}, topics...)
}
func groupList(t *testing.T, f *fixture) any {
	g := f.groups(t)
	slices.Sort(g)
	return g
}

// quotasNow is how many client quota entries the broker describes.
func quotasNow(t *testing.T, f *fixture) any {
	t.Helper()
	resp := f.send(t, kmsg.NewPtrDescribeClientQuotasRequest(), -1)
	return len(resp.(*kmsg.DescribeClientQuotasResponse).Entries)
}
func noNewTopic(t *testing.T, f *fixture) any { return f.topicExists(t, newT) }
func topicsNow(t *testing.T, f *fixture) any {
	return [3]bool{f.topicExists(t, topicT), f.topicExists(t, topicT2), f.topicExists(t, newT)}
}
