package metadata

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// TestRPCRefusesGarbage: the raft port closes a controller RPC connection that sends a
// bad preamble, an oversized frame, an unknown key or a malformed body, and keeps
// serving raft and good RPCs.
func TestRPCRefusesGarbage(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	bad := [][]byte{
		[]byte("SXXX"), // bad preamble
		append(rpc.Magic[:], 0x7f, 0xff, 0xff, 0xff),                                          // 2 GiB frame
		append(rpc.Magic[:], rpc.AppendRequestFrame(nil, 999, 0, 1, nil)...),                  // unknown key
		append(rpc.Magic[:], rpc.AppendRequestFrame(nil, rpc.KeyForward, 0, 1, []byte{1})...), // short body
		append(rpc.Magic[:], rpc.AppendRequestFrame(nil, rpc.KeyForward, 7, 1, []byte{})...),  // unknown version
		append(rpc.Magic[:], rpc.AppendRequestFrame(nil, rpc.KeyBrokerHeartbeat, 1, 1, []byte{0xff})...),
	}
	for i, b := range bad {
		conn, err := net.DialTimeout("tcp", l.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(b); err != nil {
			t.Fatalf("case %d: write: %v", i, err)
		}
		if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("case %d: read %d bytes, err %v; want the connection closed", i, n, err)
		}
		conn.Close()
	}
	// A good request on a new connection is served, and raft still works.
	rc := rpc.NewClient(ErrNotRunning, nil)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.Version, hb.BrokerID, hb.BrokerEpoch = rpc.VerBrokerHeartbeat, 99, 1
	resp, err := rc.CallKmsg(ctx, l.addr, hb)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.BrokerHeartbeatResponse).ErrorCode; code != 102 { // BROKER_ID_NOT_REGISTERED
		t.Errorf("heartbeat of an unknown broker: code %d", code)
	}
	f := c.follower()
	if rt := createTopicOn(t, f, "still-works", 1, 3, nil); rt.ErrorCode != 0 {
		t.Fatalf("create after garbage: %d %s", rt.ErrorCode, *rt.ErrorMessage)
	}
}

// TestStopWithSilentConnection: a connection to the raft port that never sends a byte
// does not hold up Stop.
func TestStopWithSilentConnection(t *testing.T) {
	m, _ := startModule(t, t.TempDir(), func(m *Module, _ *fakeContext) { m.RaftListen = "127.0.0.1:0" })
	conn, err := net.Dial("tcp", m.node.mux.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, 10*time.Second, func() bool { // the mux is sniffing it
		return m.node.mux.Tracked() > 0
	})
	start := time.Now()
	stopModule(t, m)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %v", d)
	}
}

// TestCreateTopicsAfterRegistration: a topic whose replication factor needs a broker
// that registered a moment ago is created through a broker that is not the controller,
// whose image may not list that broker yet (it catches up with the controller and plans
// again instead of answering INVALID_REPLICATION_FACTOR); likewise CreatePartitions of a
// topic created a moment ago through another broker.
func TestCreateTopicsAfterRegistration(t *testing.T) {
	c := newCluster(t, 3)
	for id := int32(4); id <= 6; id++ {
		c.addNonVoter(id, "")
		f := c.follower()
		if rt := createTopicOn(t, f, fmt.Sprintf("after-%d", id), 1, int16(id), nil); rt.ErrorCode != 0 {
			t.Fatalf("broker %d registered; RF %d through node %d: code %d %s", id, id, f.id, rt.ErrorCode, *rt.ErrorMessage)
		}
	}
	// A topic created through one broker gets partitions added through another at once
	// (its image may not have the topic yet).
	var others []*tnode
	for _, nd := range c.running() {
		if nd != c.leader() {
			others = append(others, nd)
		}
	}
	for i := range 5 {
		a, b := others[i%len(others)], others[(i+1)%len(others)]
		name := fmt.Sprintf("grow-%d", i)
		if rt := createTopicOn(t, a, name, 1, 2, nil); rt.ErrorCode != 0 {
			t.Fatalf("create %s through %d: %d", name, a.id, rt.ErrorCode)
		}
		cp := kmsg.NewPtrCreatePartitionsRequest()
		cp.Version, cp.TimeoutMillis = 3, 20000
		cpt := kmsg.NewCreatePartitionsRequestTopic()
		cpt.Topic, cpt.Count = name, 3
		cp.Topics = append(cp.Topics, cpt)
		if resp := call[*kmsg.CreatePartitionsResponse](t, b.fc, nil, cp); resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("grow %s through %d right after creating it through %d: code %d", name, b.id, a.id, resp.Topics[0].ErrorCode)
		}
	}
	rc := rpc.NewClient(ErrNotRunning, nil)
	defer rc.Close()
	// The barrier itself: an empty forward answers the controller's applied index.
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := l.m.Image().Version
	body, err := rc.Call(ctx, l.addr, rpc.KeyForward, rpc.VerForward, (&rpc.ForwardRequest{}).AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := rpc.DecodeForwardResponse(body)
	if err != nil || fr.ErrorCode != 0 || fr.AppliedIndex < int64(before) || len(fr.Results) != 0 {
		t.Fatalf("barrier: %+v %v (leader image version %d before)", fr, err, before)
	}
}
