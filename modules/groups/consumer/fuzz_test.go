package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzSeeds are encoded heartbeats: joins, a regex join, a heartbeat with
// owned partitions, leaves.
func fuzzSeeds() [][]byte {
	var out [][]byte
	enc := func(r *kmsg.ConsumerGroupHeartbeatRequest) { out = append(out, r.AppendTo(nil)) }
	enc(joinReq("m1", "t"))
	r := joinReq("m2")
	r.SubscribedTopicNames = nil
	r.SubscribedTopicRegex = strp("t.*")
	r.InstanceID = strp("i")
	r.RackID = strp("r")
	r.ServerAssignor = strp("range")
	enc(r)
	enc(hbReq("m1", 1, tps{topicID("t"): {0, 1, -1, 1 << 30}}))
	enc(hbReq("m1", -1, nil))
	r = hbReq("m2", -2, nil)
	r.InstanceID = strp("i")
	enc(r)
	return out
}

// FuzzHeartbeat feeds arbitrary bytes, decoded as a ConsumerGroupHeartbeat
// request, to a group with members; nothing may panic and the invariants
// must hold.
func FuzzHeartbeat(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(byte(1), s)
		f.Add(byte(0), s)
	}
	f.Add(byte(1), []byte{})
	f.Fuzz(func(t *testing.T, knobs byte, data []byte) {
		version := int16(knobs & 1)
		h := newHarness(t, Config{MaxSize: 4, MaxTopics: 64, MaxRegexBytes: 64, RegexRefreshInterval: -1})
		h.topics.add("t", 4)
		h.topics.add("t2", 2)
		for _, id := range []string{"m1", "m2"} {
			req := joinReq(id, "t", "t2")
			if id == "m2" {
				req.InstanceID = strp("i")
			}
			h.mustOK(h.hb(req))
		}
		var req kmsg.ConsumerGroupHeartbeatRequest
		req.Default()
		req.Version = version
		if err := req.ReadFrom(data); err != nil {
			return
		}
		// Send it a few times with time passing: first contact, repeat,
		// and after timeouts.
		for range 3 {
			h.g.Heartbeat(context.Background(), &req, version, Client{ID: "fuzz"}, h.topics, h.now)
			checkInvariants(t, h.g)
			h.advance(time.Duration(knobs>>1) * time.Second)
		}
		_ = h.g.Describe(h.topics, h.now)
		_ = h.g.ValidateCommit(req.MemberID, req.MemberEpoch)
		_ = h.g.ValidateFetch(req.MemberID, req.MemberEpoch)
	})
}
