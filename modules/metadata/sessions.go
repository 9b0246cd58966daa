package metadata

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// The controller side of the broker lifecycle (see doc.go, "Brokers"): sessions,
// fencing, registration and heartbeats as the controller serves them, and leader
// elections.

// brokerSession is what the controller knows of a broker's liveness. Sessions live in
// the controller's memory only: a new controller starts every broker's session afresh,
// so each registered broker gets a whole session timeout to reach it before it is
// fenced.
type brokerSession struct {
	epoch        uint64    // registration epoch the session belongs to
	lastSeen     time.Time // last heartbeat or registration (or the session's start)
	heard        bool      // a heartbeat or registration arrived in this session
	offset       int64     // metadata offset from the last heartbeat, -1 unknown
	caughtUp     time.Time // last heartbeat whose offset reached the commit index
	wantShutdown bool
}

// controller is the active controller's memory and duties: broker sessions, fencing,
// leader elections, reassignments, and the controller side of the controller RPC
// (registration, heartbeats, forwarded records, DescribeQuorum, observers). Its loop
// runs only while this node leads raft (leaderLoop); what it decides it proposes
// through the node like any other write, so the log, not this memory, is the truth.
//
// Lock order: controller.mu guards sessions only and is taken after no other lock;
// nothing else is locked while it is held (proposals happen after unlocking).
type controller struct {
	*node
	mu       sync.Mutex
	sessions map[int32]*brokerSession
	kick     chan struct{}
	// featuresMu makes UpdateFeatures one request at a time on the controller
	// (57_update_features.go).
	featuresMu sync.Mutex
}

func newController(n *node) *controller {
	return &controller{node: n, sessions: map[int32]*brokerSession{}, kick: make(chan struct{}, 1)}
}

// wake makes the controller loop look at the image now rather than at its next tick.
func (c *controller) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// reset forgets every session (a new term).
func (c *controller) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessions = map[int32]*brokerSession{}
}

// session returns the session of node at epoch, starting one (lastSeen now) if the
// epoch changed. c.mu must be held.
func (c *controller) session(node int32, epoch uint64, now time.Time) *brokerSession {
	s := c.sessions[node]
	if s == nil || s.epoch != epoch {
		s = &brokerSession{epoch: epoch, lastSeen: now, offset: -1}
		c.sessions[node] = s
	}
	return s
}

// ctlRegister serves BrokerRegistration on the controller: it writes a RegisterBroker
// entry (unfenced) and answers the entry's index as the broker epoch.
func (c *controller) ctlRegister(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = -1
	if !c.isLeader() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	// A controller that just started may not have applied its whole log yet: the
	// checks below (feature levels above all) need the complete image.
	if r := c.raft.Load(); r == nil || c.await(ctx, r.Barrier(0)) != nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	im := c.hub.image()
	if req.ClusterID != "" && im.ClusterID != "" && req.ClusterID != im.ClusterID {
		c.log.Warn("refused broker registration: cluster id mismatch", "node", req.BrokerID, "cluster_id", req.ClusterID)
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	if req.BrokerID < 0 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	// Two live processes with one node id would take turns replacing each other's
	// registration: as Kafka, a new incarnation is refused while the registered one is
	// unfenced and its session alive. A broker restarted after a crash therefore waits
	// up to a session timeout; one that shut down cleanly is fenced and comes back at
	// once.
	if old := im.Brokers[req.BrokerID]; old != nil && !old.Fenced {
		reg := c.hub.state().Regs[req.BrokerID]
		_, sessionTimeout := c.lifecycleIntervals()
		c.mu.Lock()
		s := c.sessions[req.BrokerID]
		// Only a session this controller heard from counts: the grace session a new
		// controller starts for every broker does not (a lone broker restarting is its
		// own new controller and must not wait for its old session).
		live := s != nil && s.heard && s.epoch == reg.Epoch && time.Since(s.lastSeen) <= sessionTimeout
		c.mu.Unlock()
		if live && reg.Incarnation != image.UUID(req.IncarnationID) {
			c.log.Info("refused broker registration: the node's previous incarnation is still live", "node", req.BrokerID)
			resp.ErrorCode = kerr.DuplicateBrokerRegistration.Code
			return resp
		}
	}
	if old := im.Brokers[req.BrokerID]; old != nil && !old.Fenced && c.hub.state().Regs[req.BrokerID].Incarnation != image.UUID(req.IncarnationID) {
		c.leaveISRs(ctx, req.BrokerID)
	}
	// A broker that cannot run at the cluster's finalized feature levels is refused,
	// as in Kafka: it does not start rather than misbehave.
	features, why := registrationFeatures(im, req.Features)
	if why != "" {
		c.log.Warn("refused broker registration: unsupported feature level", "node", req.BrokerID, "why", why)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp
	}
	rec := &image.RegisterBrokerRecord{NodeID: req.BrokerID, Incarnation: req.IncarnationID, Rack: derefOr(req.Rack, ""), Features: features}
	for _, l := range req.Listeners {
		rec.Endpoints = append(rec.Endpoints, image.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	_, res, errs := c.proposeLocal(ctx, []image.Record{rec})
	if errs[0] != nil {
		resp.ErrorCode, _ = errCode(errs[0])
		return resp
	}
	resp.BrokerEpoch = int64(res[0].Index)
	c.mu.Lock()
	s := c.session(req.BrokerID, res[0].Index, time.Now())
	s.heard = true
	c.mu.Unlock()
	c.wake() // offline partitions it replicates may get a leader
	c.log.Info("registered broker", "node", req.BrokerID, "epoch", resp.BrokerEpoch, "incarnation", image.UUID(req.IncarnationID).String())
	return resp
}

// leaveISRs takes node out of every ISR it is not the last member of, and moves its
// leaderships, as fencing it would, before a new incarnation of it registers in place of
// one that was never fenced. That incarnation crashed without this controller seeing
// its session expire (a controller failover, or a quick restart), so its log may have
// lost what it had not written to disk; a registration is unfenced at once, so the
// fencing repairs would never happen (Kafka handles this as an unclean shutdown,
// KIP-966). A change that loses a race is planned again, twice at most; after that the
// registration goes ahead (and the leader's ISR checks remain).
func (c *controller) leaveISRs(ctx context.Context, node int32) {
	for try := 0; try < 3; try++ {
		im := c.hub.image()
		recs := electLeadersWithout(im, c.uncleanElection(im), node)
		if len(recs) == 0 {
			return
		}
		_, _, errs := c.proposeLocal(ctx, recs)
		stale := false
		for i, err := range errs {
			switch {
			case err == nil:
				c.logPartitionChange(im, recs[i].(*image.PartitionChangeRecord))
			case errors.Is(err, image.ErrStale):
				stale = true
			default:
				c.log.Warn("taking a re-registering broker out of the ISRs", "node", node, "err", err)
				return
			}
		}
		c.log.Info("a new incarnation replaces a broker that was not fenced: it left the ISRs", "node", node, "changes", len(recs))
		if !stale {
			return
		}
	}
}

// ctlHeartbeat serves BrokerHeartbeat on the controller.
func (c *controller) ctlHeartbeat(req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	r := c.raft.Load()
	if r == nil || r.State() != raft.Leader {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	st := c.hub.state()
	b := st.Image.Brokers[req.BrokerID]
	if b == nil {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
		return resp
	}
	epoch := st.Regs[req.BrokerID].Epoch
	if uint64(req.BrokerEpoch) != epoch {
		resp.ErrorCode = kerr.StaleBrokerEpoch.Code
		return resp
	}
	now := time.Now()
	commit := r.CommitIndex()
	c.mu.Lock()
	s := c.session(req.BrokerID, epoch, now)
	s.lastSeen, s.heard, s.offset = now, true, req.CurrentMetadataOffset
	caughtUp := req.CurrentMetadataOffset >= 0 && uint64(req.CurrentMetadataOffset) >= min(commit, st.Image.Version)
	if caughtUp {
		s.caughtUp = now
	}
	wake := s.wantShutdown != req.WantShutdown || b.Fenced != req.WantShutdown
	s.wantShutdown = req.WantShutdown
	c.mu.Unlock()
	if wake {
		c.wake()
	}
	resp.IsCaughtUp, resp.IsFenced = caughtUp, b.Fenced
	resp.ShouldShutdown = req.WantShutdown && b.Fenced && !leadsAny(st.Image, req.BrokerID)
	return resp
}

// ctlAddObserver adds a broker to the raft configuration as a non-voter.
func (c *controller) ctlAddObserver(ctx context.Context, req *rpc.AddObserverRequest) *rpc.AddObserverResponse {
	resp := &rpc.AddObserverResponse{LeaderID: c.leaderID()}
	r := c.raft.Load()
	if r == nil || r.State() != raft.Leader {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	if req.NodeID < 0 || req.Address == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	id := raft.ServerID(strconv.FormatInt(int64(req.NodeID), 10))
	f := r.GetConfiguration()
	if err := c.await(ctx, f); err != nil {
		resp.ErrorCode, _ = errCode(mapRaftErr(err))
		return resp
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id && s.Suffrage == raft.Voter {
			if s.Address == raft.ServerAddress(req.Address) {
				return resp // a voter added by AddRaftVoter, restarted: it follows as a voter
			}
			c.log.Warn("refused non-voter: node id is a voter at another address", "node", req.NodeID,
				"address", req.Address, "voter_address", s.Address)
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
		if s.ID == id && s.Address == raft.ServerAddress(req.Address) {
			return resp // already there
		}
	}
	if err := c.await(ctx, r.AddNonvoter(id, raft.ServerAddress(req.Address), 0, 10*time.Second)); err != nil {
		resp.ErrorCode, _ = errCode(mapRaftErr(err))
		return resp
	}
	c.log.Info("added raft non-voter", "node", req.NodeID, "address", req.Address)
	return resp
}

// leadsAny reports whether node leads a partition.
func leadsAny(im *kernel.Image, node int32) bool {
	for _, t := range im.Topics() {
		for _, p := range t.Partitions {
			if p.Leader == node {
				return true
			}
		}
	}
	return false
}

// controllerLoop runs the active controller's periodic duties until ctx ends or this
// broker loses raft leadership: fence brokers whose session expired or that asked to
// shut down, unfence those heard from again, elect leaders, and every
// leader.imbalance.check.interval.seconds move leadership back to preferred replicas
// (auto.leader.rebalance.enable).
func (c *controller) controllerLoop(ctx context.Context, r *raft.Raft) {
	hb, _ := c.lifecycleIntervals()
	tick := min(max(hb/2, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var scanned uint64 // image version the last election scan saw
	lastBalance, lastLook := time.Now(), time.Now()
	for {
		if r.State() != raft.Leader {
			return
		}
		scanned = c.controllerTick(ctx, scanned)
		// leader.imbalance.check.interval.seconds is at least 1: the broker configs (which
		// may change) are resolved at most once a second.
		if now := time.Now(); now.Sub(lastLook) >= time.Second {
			lastLook = now
			s := c.brokerSettings(c.hub.image())
			if now.Sub(lastBalance) >= time.Duration(s.LeaderImbalanceCheckIntervalSeconds)*time.Second {
				lastBalance = now
				if s.AutoLeaderRebalanceEnable {
					c.rebalanceLeaders(ctx, s.LeaderImbalancePerBrokerPercentage)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
	}
}

// controllerTick fences and unfences, then elects leaders unless the image is still
// the one the previous scan saw (scanned); it returns the version it scanned.
func (c *controller) controllerTick(ctx context.Context, scanned uint64) uint64 {
	_, sessionTimeout := c.lifecycleIntervals()
	now := time.Now()
	st := c.hub.state()
	var recs []image.Record
	c.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(st.Image.Brokers)) {
		b, epoch := st.Image.Brokers[id], st.Regs[id].Epoch
		s := c.session(id, epoch, now)
		expired := now.Sub(s.lastSeen) > sessionTimeout
		switch {
		case !b.Fenced && (expired || s.wantShutdown):
			c.log.Info("fencing broker", "node", id, "epoch", epoch, "session_expired", expired, "controlled_shutdown", s.wantShutdown)
			recs = append(recs, &image.FenceBrokerRecord{NodeID: id, Epoch: epoch})
		case b.Fenced && s.heard && !expired && !s.wantShutdown:
			c.log.Info("unfencing broker", "node", id, "epoch", epoch)
			recs = append(recs, &image.UnfenceBrokerRecord{NodeID: id, Epoch: epoch})
		}
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if len(recs) > 0 {
		if _, _, errs := c.proposeLocal(ctx, recs); errors.Join(errs...) != nil {
			c.log.Debug("fence/unfence entries", "err", errors.Join(errs...))
		}
	}
	im := c.hub.image()
	if im.Version == scanned {
		return scanned
	}
	changes := electLeaders(im, c.uncleanElection(im))
	if len(changes) == 0 {
		// Liveness first; reassignments complete on a partition that needs no repair.
		changes = completeReassignments(im)
	}
	if len(changes) > 0 {
		_, _, errs := c.proposeLocal(ctx, changes)
		moved := 0
		for i, err := range errs {
			if err == nil {
				moved++
				c.logPartitionChange(im, changes[i].(*image.PartitionChangeRecord))
			}
		}
		c.log.Info("changed partitions (broker liveness, reassignments)", "changes", moved, "proposed", len(changes))
		return 0 // look again next tick: a change may have been rejected as stale
	}
	return im.Version
}

// electLeaders returns the PartitionChange entries (version 1, each checked against
// the partition epoch it was computed from) that bring every partition in line with
// broker liveness, as KRaft does when it fences a broker:
//
//   - An ISR member that is not a live broker (fenced or unregistered) leaves the ISR,
//     unless no member is live: then the ISR stays as it is (a partition is never left
//     with an empty ISR; its last members are the ones that can lead it cleanly again).
//   - A partition whose leader is not a live ISR member gets the first live ISR member
//     in replica order, with leader epoch + 1. Without one, when unclean(topic) allows it,
//     the first live replica leads with the ISR {it} (an unclean election: records only
//     it had are kept, others' acknowledged records may be lost); otherwise it is offline
//     (leader -1) until an ISR member comes back.
//
// It reads only im and unclean, so a new controller computes the same repairs.
func electLeaders(im *kernel.Image, unclean func(*kernel.TopicImage) bool) []image.Record {
	return electLeadersWithout(im, unclean, -1)
}

// electLeadersWithout is electLeaders with node (if not -1) taken for dead whatever the
// image says: the repairs its fencing would bring.
func electLeadersWithout(im *kernel.Image, unclean func(*kernel.TopicImage) bool, node int32) []image.Record {
	alive := func(id int32) bool { b := im.Brokers[id]; return b != nil && !b.Fenced && id != node }
	var out []image.Record
	for _, name := range slices.Sorted(im.TopicNames()) {
		t := im.Topic(name)
		for _, p := range t.Partitions {
			isr := slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !alive(id) })
			if len(isr) == 0 {
				isr = p.ISR
			}
			leader := p.Leader
			if !alive(leader) || !slices.Contains(isr, leader) {
				leader = -1
				for _, r := range p.Replicas {
					if alive(r) && slices.Contains(isr, r) {
						leader = r
						break
					}
				}
				if leader == -1 && unclean(t) {
					if i := slices.IndexFunc(p.Replicas, alive); i >= 0 {
						leader, isr = p.Replicas[i], []int32{p.Replicas[i]}
					}
				}
			}
			if leader == p.Leader && slices.Equal(isr, p.ISR) {
				continue
			}
			rec := &image.PartitionChangeRecord{Topic: t.Name, ID: t.ID, Partition: p.Partition, PartitionEpoch: p.PartitionEpoch}
			if leader != p.Leader {
				rec.Leader = &leader
			}
			if !slices.Equal(isr, p.ISR) {
				rec.ISR = slices.Clone(isr)
			}
			out = append(out, rec)
		}
	}
	return out
}

// uncleanElection returns whether a topic allows unclean leader elections: its
// unclean.leader.election.enable, else the dynamic broker default (this node's, then the
// cluster's), else this controller's static config, else false. Results are cached per
// topic for one scan of im.
func (c *controller) uncleanElection(im *kernel.Image) func(*kernel.TopicImage) bool {
	merged := c.mergedBrokerConfigs(im)
	cache := map[*kernel.TopicImage]bool{}
	return func(t *kernel.TopicImage) bool {
		v, ok := cache[t]
		if !ok {
			v = kconfig.ResolveTopic(t.Configs, merged).UncleanLeaderElectionEnable
			cache[t] = v
		}
		return v
	}
}

// logPartitionChange notes a leader or ISR change the controller made from im: an
// unclean election (a leader from outside the ISR) as a warning, the rest at debug level.
func (c *controller) logPartitionChange(im *kernel.Image, r *image.PartitionChangeRecord) {
	old := im.Partition(r.Topic, r.Partition)
	if old == nil {
		return
	}
	args := []any{"topic", r.Topic, "partition", r.Partition, "old_leader", old.Leader, "old_isr", old.ISR}
	if r.Leader != nil {
		args = append(args, "leader", *r.Leader)
	}
	if r.ISR != nil {
		args = append(args, "isr", r.ISR)
	}
	if r.Leader != nil && *r.Leader >= 0 && !slices.Contains(old.ISR, *r.Leader) {
		c.log.Warn("unclean leader election: records acknowledged by the old ISR may be lost", args...)
		return
	}
	c.log.Debug("partition changed", args...)
}
