package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/metadata/image"
)

// rpcSeeds are valid request frames (size included) for the fuzz corpus and tests.
func rpcSeeds() [][]byte {
	entry, _ := image.EncodeRecord(&image.ProducerIDsRecord{BrokerID: 1, Count: 5})
	fwd := (&ForwardRequest{TimeoutMs: 1000, Entries: [][]byte{entry}}).AppendTo(nil)
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.Version, hb.BrokerID, hb.BrokerEpoch = VerBrokerHeartbeat, 1, 7
	add := (&AddObserverRequest{NodeID: 4, Address: "127.0.0.1:1"}).AppendTo(nil)
	return [][]byte{
		AppendRequestFrame(nil, KeyForward, VerForward, 1, fwd),
		AppendRequestFrame(nil, KeyBrokerHeartbeat, hb.Version, 2, hb.AppendTo(nil)),
		AppendRequestFrame(nil, KeyAddObserver, VerAddObserver, 3, add),
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
			h, msg, err := decodeRequest(frame)
			if err != nil {
				if !errors.Is(err, ErrFrame) {
					t.Fatalf("error not marked errRPCFrame: %v", err)
				}
				continue
			}
			switch m := msg.(type) {
			case *ForwardRequest:
				again, err := decodeForwardRequest(m.AppendTo(nil))
				if err != nil || !slices.EqualFunc(again.Entries, m.Entries, bytes.Equal) || again.TimeoutMs != m.TimeoutMs {
					t.Fatalf("forward request does not round-trip: %v", err)
				}
			case *AddObserverRequest:
				again, err := decodeAddObserverRequest(m.AppendTo(nil))
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
	in := &ForwardResponse{ErrorCode: 0, LeaderID: 2, AppliedIndex: 99, Results: []ForwardResult{
		{Code: 0, Index: 98, FirstProducerID: 1000},
		{Code: 4, Message: "topic exists"},
	}}
	out, err := DecodeForwardResponse(in.AppendTo(nil))
	if err != nil || out.AppliedIndex != 99 || len(out.Results) != 2 || out.Results[0].FirstProducerID != 1000 {
		t.Fatalf("%+v %v", out, err)
	}
	if r := out.Results[1]; r.Code != 4 || r.Message != "topic exists" {
		t.Errorf("result %+v", r)
	}
	if _, err := DecodeForwardResponse(in.AppendTo(nil)[:20]); !errors.Is(err, ErrFrame) {
		t.Errorf("truncated response: %v", err)
	}
}

func TestReadFrameBounds(t *testing.T) {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 100)
	if _, err := readFrame(bytes.NewReader(b), 50); !errors.Is(err, ErrFrame) {
		t.Errorf("oversized: %v", err)
	}
	b = binary.BigEndian.AppendUint32(nil, 0xffffffff)
	if _, err := readFrame(bytes.NewReader(b), 50); !errors.Is(err, ErrFrame) {
		t.Errorf("negative: %v", err)
	}
	b = append(binary.BigEndian.AppendUint32(nil, 10), 1, 2, 3)
	if _, err := readFrame(bytes.NewReader(b), 50); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated: %v", err)
	}
}
