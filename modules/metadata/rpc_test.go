package metadata

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/metadata/image"
)

// rpcSeeds are valid request frames (size included) for the fuzz corpus and tests.
func rpcSeeds() [][]byte {
	entry, _ := image.EncodeRecord(&image.ProducerIDsRecord{BrokerID: 1, Count: 5})
	fwd := (&forwardRequest{TimeoutMs: 1000, Entries: [][]byte{entry}}).appendTo(nil)
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.Version, hb.BrokerID, hb.BrokerEpoch = rpcVerBrokerHeartbeat, 1, 7
	add := (&addObserverRequest{NodeID: 4, Address: "127.0.0.1:1"}).appendTo(nil)
	return [][]byte{
		appendRequestFrame(nil, rpcKeyForward, rpcVerForward, 1, fwd),
		appendRequestFrame(nil, rpcKeyBrokerHeartbeat, hb.Version, 2, hb.AppendTo(nil)),
		appendRequestFrame(nil, rpcKeyAddObserver, rpcVerAddObserver, 3, add),
	}
}

// FuzzDecodeRPCRequest feeds a byte stream to the server's frame reader and decoder:
// nothing may panic, and what decodes must re-encode to an equal message.
func FuzzDecodeRPCRequest(f *testing.F) {
	seeds := rpcSeeds()
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 3, 0, 1, 0})          // short header
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0}) // max length claimed
	f.Add(seeds[0])
	f.Add(append(append([]byte{}, seeds[0]...), seeds[1]...)) // two back to back
	f.Add(seeds[2])
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			frame, err := readFrame(r, 1<<20)
			if err != nil {
				return
			}
			h, msg, err := decodeRPCRequest(frame)
			if err != nil {
				if !errors.Is(err, errRPCFrame) {
					t.Fatalf("error not marked errRPCFrame: %v", err)
				}
				continue
			}
			switch m := msg.(type) {
			case *forwardRequest:
				again, err := decodeForwardRequest(m.appendTo(nil))
				if err != nil || len(again.Entries) != len(m.Entries) || again.TimeoutMs != m.TimeoutMs {
					t.Fatalf("forward request does not round-trip: %v", err)
				}
			case *addObserverRequest:
				again, err := decodeAddObserverRequest(m.appendTo(nil))
				if err != nil || *again != *m {
					t.Fatalf("add observer does not round-trip: %v", err)
				}
			case kmsg.Request:
				if m.Key() != h.key {
					t.Fatalf("key %d decoded as %d", h.key, m.Key())
				}
			}
		}
	})
}

func TestForwardResponseRoundTrip(t *testing.T) {
	in := &forwardResponse{ErrorCode: 0, LeaderID: 2, AppliedIndex: 99, Results: []forwardResult{
		{Code: 0, Index: 98, FirstProducerID: 1000},
		{Code: forwardCode(image.ErrTopicExists), Message: "topic exists"},
	}}
	out, err := decodeForwardResponse(in.appendTo(nil))
	if err != nil || out.AppliedIndex != 99 || len(out.Results) != 2 || out.Results[0].FirstProducerID != 1000 {
		t.Fatalf("%+v %v", out, err)
	}
	if err := forwardError(out.Results[1].Code, out.Results[1].Message); !errors.Is(err, image.ErrTopicExists) {
		t.Errorf("forwarded error %v does not match errTopicExists", err)
	}
	if _, err := decodeForwardResponse(in.appendTo(nil)[:20]); !errors.Is(err, errRPCFrame) {
		t.Errorf("truncated response: %v", err)
	}
}

// TestRPCRefusesGarbage: the raft port closes a controller RPC connection that sends a
// bad preamble, an oversized frame, an unknown key or a malformed body, and keeps
// serving raft and good RPCs.
func TestRPCRefusesGarbage(t *testing.T) {
	c := newCluster(t, 3)
	l := c.leader()
	bad := [][]byte{
		[]byte("SXXX"), // bad preamble
		append(rpcMagic[:], 0x7f, 0xff, 0xff, 0xff),                                     // 2 GiB frame
		append(rpcMagic[:], appendRequestFrame(nil, 999, 0, 1, nil)...),                 // unknown key
		append(rpcMagic[:], appendRequestFrame(nil, rpcKeyForward, 0, 1, []byte{1})...), // short body
		append(rpcMagic[:], appendRequestFrame(nil, rpcKeyForward, 7, 1, []byte{})...),  // unknown version
		append(rpcMagic[:], appendRequestFrame(nil, rpcKeyBrokerHeartbeat, 1, 1, []byte{0xff})...),
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
	var rc rpcClient
	rc.idle = map[string][]*rpcConn{}
	defer rc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.Version, hb.BrokerID, hb.BrokerEpoch = rpcVerBrokerHeartbeat, 99, 1
	resp, err := rc.callKmsg(ctx, l.addr, hb)
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

func TestReadFrameBounds(t *testing.T) {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 100)
	if _, err := readFrame(bytes.NewReader(b), 50); !errors.Is(err, errRPCFrame) {
		t.Errorf("oversized: %v", err)
	}
	b = binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if _, err := readFrame(bytes.NewReader(b), 50); !errors.Is(err, errRPCFrame) {
		t.Errorf("negative: %v", err)
	}
	b = append(binary.BigEndian.AppendUint32(nil, 10), 1, 2, 3)
	if _, err := readFrame(bytes.NewReader(b), 50); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated: %v", err)
	}
}

// TestStopWithSilentConnection: a connection to the raft port that never sends a byte
// does not hold up Stop.
func TestStopWithSilentConnection(t *testing.T) {
	m, _ := startModule(t, t.TempDir(), func(m *Module, _ *fakeContext) { m.RaftListen = "127.0.0.1:0" })
	conn, err := net.Dial("tcp", m.mux.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, 10*time.Second, func() bool { // the mux is sniffing it
		m.mux.mu.Lock()
		defer m.mux.mu.Unlock()
		return len(m.mux.conns) > 0
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
	var rc rpcClient
	rc.idle = map[string][]*rpcConn{}
	defer rc.close()
	// The barrier itself: an empty forward answers the controller's applied index.
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := l.m.Image().Version
	body, err := rc.call(ctx, l.addr, rpcKeyForward, rpcVerForward, (&forwardRequest{}).appendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := decodeForwardResponse(body)
	if err != nil || fr.ErrorCode != 0 || fr.AppliedIndex < int64(before) || len(fr.Results) != 0 {
		t.Fatalf("barrier: %+v %v (leader image version %d before)", fr, err, before)
	}
}
