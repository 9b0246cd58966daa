package share

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzSeeds are encoded heartbeats: joins, a heartbeat, a resubscription
// with a rack, a leave, a wild epoch.
func fuzzSeeds() map[string][]byte {
	enc := func(r *kmsg.ShareGroupHeartbeatRequest) []byte { return r.AppendTo(nil) }
	resub := hbReq("m1", 1)
	resub.SubscribedTopicNames = []string{"t2", "missing"}
	resub.RackID = strp("r1")
	joinNew := joinReq("m3", "t", "t2")
	joinNew.RackID = strp("r2")
	return map[string][]byte{
		"join_known":  enc(joinReq("m1", "t")),
		"join_new":    enc(joinNew),
		"join_empty":  enc(joinReq("m4")),
		"heartbeat":   enc(hbReq("m1", 1)),
		"resubscribe": enc(resub),
		"leave":       enc(hbReq("m2", -1)),
		"wild_epoch":  enc(hbReq("m1", 1<<30)),
	}
}

// FuzzHeartbeat feeds arbitrary bytes, decoded as a ShareGroupHeartbeat
// request, to a group with members; nothing may panic and the invariants
// must hold. knobs: bit 0 is the version, the rest seconds passing between
// the repeated sends.
func FuzzHeartbeat(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(byte(1), s)
		f.Add(byte(0), s)
	}
	f.Add(byte(1), []byte{})
	f.Fuzz(func(t *testing.T, knobs byte, data []byte) {
		version := int16(knobs & 1)
		h := newHarness(t, Config{MaxSize: 3, MaxTopics: 64})
		h.topics.add("t", 4)
		h.topics.add("t2", 1)
		h.mustOK(h.hb(joinReq("m1", "t", "t2")))
		h.mustOK(h.hb(joinReq("m2", "t2")))
		var req kmsg.ShareGroupHeartbeatRequest
		req.Default()
		req.Version = version
		if err := req.ReadFrom(data); err != nil {
			return
		}
		// Send it a few times with time passing: first contact, repeat, and
		// after sessions expire.
		for range 3 {
			resp := h.g.Heartbeat(&req, version, Client{ID: "fuzz"}, h.topics, h.now)
			checkInvariants(t, h.g)
			if resp.ErrorCode == 0 && resp.MemberEpoch >= 0 {
				if resp.MemberEpoch != h.g.GroupEpoch() || !h.g.IsMember(req.MemberID) {
					t.Fatalf("accepted heartbeat: epoch %d, group epoch %d", resp.MemberEpoch, h.g.GroupEpoch())
				}
				respAssignment(t, resp)
			}
			h.advance(time.Duration(knobs>>1) * time.Second)
		}
		_ = h.g.Describe(h.topics, h.now)
		_ = h.g.Members()
		h.g = Restore("g", h.g.cfg, h.g.Snapshot(), h.topics, h.now)
		checkInvariants(t, h.g)
	})
}
