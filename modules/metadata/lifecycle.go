package metadata

import (
	"context"
	"errors"
	"fmt"
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

// Broker lifecycle (see doc.go, "Brokers"): registration, heartbeats, fencing,
// controlled shutdown, and the controller's leader elections.

// Defaults of the lifecycle configs (Kafka's).
const (
	defaultHeartbeatIntervalMs = 2000
	defaultSessionTimeoutMs    = 9000
	// controlledShutdownWait bounds how long Stop waits for the controller to move
	// this broker's leaderships away.
	controlledShutdownWait = 10 * time.Second
)

// lifecycleIntervals reads broker.heartbeat.interval.ms and broker.session.timeout.ms
// from the static configs (they are read-only, as in Kafka).
func (m *Module) lifecycleIntervals() (heartbeat, session time.Duration) {
	get := func(name string, def int64) time.Duration {
		if v, ok := m.kctx.Broker().StaticConfigs[name]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				return time.Duration(n) * time.Millisecond
			}
		}
		return time.Duration(def) * time.Millisecond
	}
	return get("broker.heartbeat.interval.ms", defaultHeartbeatIntervalMs), get("broker.session.timeout.ms", defaultSessionTimeoutMs)
}

// ----- broker side -----

// register registers this broker with the controller (a new incarnation each process
// start, chosen in Start) once the log has a cluster id, and returns when the image
// holds the registration.
func (m *Module) register(ctx context.Context) error {
	bi := m.kctx.Broker() // now: listener ports are bound
	if err := m.hub.waitFor(ctx, func(im *kernel.Image) bool { return im.ClusterID != "" && im.ControllerID >= 0 }); err != nil {
		return err
	}
	if im := m.hub.image(); bi.ClusterID != "" && bi.ClusterID != im.ClusterID {
		return fmt.Errorf("configured %s, log has %s: %w", bi.ClusterID, im.ClusterID, ErrClusterIDMismatch)
	}
	// Start waits for a quorum as long as its ctx allows: a broker started before the
	// others of its cluster keeps trying.
	var epoch int64
	for {
		var err error
		if epoch, err = m.sendRegistration(ctx); err == nil {
			break
		}
		if !errors.Is(err, ErrNotController) || ctx.Err() != nil {
			return err
		}
		m.log.Info("waiting for a metadata controller to register with", "err", err)
	}
	err := m.hub.waitFor(ctx, func(im *kernel.Image) bool {
		return im.Version >= uint64(epoch) && im.Brokers[m.nodeID] != nil && m.hub.state().Regs[m.nodeID].Incarnation == m.incarnation
	})
	if err != nil {
		return err
	}
	m.registered.Store(true)
	return nil
}

// registrationRequest is this broker's BrokerRegistration.
func (m *Module) registrationRequest() *kmsg.BrokerRegistrationRequest {
	bi := m.kctx.Broker()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = rpc.VerBrokerRegistration
	req.BrokerID, req.ClusterID, req.IncarnationID = m.nodeID, m.hub.image().ClusterID, m.incarnation
	req.Rack = rackPtr(bi.Rack)
	req.PreviousBrokerEpoch = -1
	for _, l := range bi.Listeners {
		rl := kmsg.NewBrokerRegistrationRequestListener()
		rl.Name, rl.Host, rl.Port = l.Name, l.Host, uint16(l.Port)
		req.Listeners = append(req.Listeners, rl)
	}
	return req
}

// sendRegistration registers with the controller and returns the broker epoch.
func (m *Module) sendRegistration(ctx context.Context) (int64, error) {
	req := m.registrationRequest()
	var epoch int64
	err := m.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		var resp *kmsg.BrokerRegistrationResponse
		if addr == "" {
			resp = m.ctlRegister(ctx, req)
		} else {
			r, err := m.rpc.CallKmsg(ctx, addr, req)
			if err != nil {
				return errors.Is(err, rpc.ErrNotSent), err
			}
			resp = r.(*kmsg.BrokerRegistrationResponse)
		}
		switch resp.ErrorCode {
		case 0:
			epoch = resp.BrokerEpoch
			return false, nil
		case kerr.NotController.Code:
			return true, ErrNotController
		case kerr.DuplicateBrokerRegistration.Code:
			// The previous incarnation's session has not expired yet: retry.
			return true, fmt.Errorf("%w: the previous incarnation of node %d is still registered and live", ErrNotController, m.nodeID)
		case kerr.InconsistentClusterID.Code:
			return false, ErrClusterIDMismatch
		case kerr.RequestTimedOut.Code:
			return false, context.DeadlineExceeded
		}
		return false, fmt.Errorf("registration: %w", kerr.ErrorForCode(resp.ErrorCode))
	})
	if err != nil {
		return 0, err
	}
	m.brokerEpoch.Store(epoch)
	return epoch, nil
}

// heartbeatLoop sends a BrokerHeartbeat every broker.heartbeat.interval.ms (more often
// during a controlled shutdown), re-registering when the controller no longer knows
// this registration.
func (m *Module) heartbeatLoop(ctx context.Context) {
	interval, _ := m.lifecycleIntervals()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.hbKick:
		}
		m.heartbeatOnce(ctx, interval)
		next := interval
		if m.wantShutdown.Load() {
			next = min(interval, 50*time.Millisecond)
		}
		t.Reset(next)
	}
}

func (m *Module) heartbeatOnce(ctx context.Context, interval time.Duration) {
	if m.pauseHeartbeats.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, max(interval, time.Second))
	defer cancel()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version = rpc.VerBrokerHeartbeat
	req.BrokerID, req.BrokerEpoch = m.nodeID, m.brokerEpoch.Load()
	req.CurrentMetadataOffset = int64(m.hub.image().Version)
	req.WantShutdown = m.wantShutdown.Load()
	var resp *kmsg.BrokerHeartbeatResponse
	err := m.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" {
			resp = m.ctlHeartbeat(req)
		} else {
			r, err := m.rpc.CallKmsg(ctx, addr, req)
			if err != nil {
				return errors.Is(err, rpc.ErrNotSent), err
			}
			resp = r.(*kmsg.BrokerHeartbeatResponse)
		}
		if resp.ErrorCode == kerr.NotController.Code {
			return true, ErrNotController
		}
		return false, nil
	})
	if err != nil {
		if !errors.Is(err, ErrNotRunning) {
			m.log.Debug("broker heartbeat failed", "err", err)
		}
		if req.WantShutdown {
			m.shutdownFailures.Add(1)
		}
		return
	}
	switch resp.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code, kerr.BrokerIDNotRegistered.Code:
		// The controller knows a newer (or no) registration of this node: register
		// again, same incarnation.
		m.log.Info("re-registering with the controller", "reason", kerr.ErrorForCode(resp.ErrorCode))
		if _, err := m.sendRegistration(ctx); err != nil {
			m.log.Warn("re-registration failed", "err", err)
		}
		return
	default:
		m.log.Warn("broker heartbeat refused", "err", kerr.ErrorForCode(resp.ErrorCode))
		return
	}
	if resp.ShouldShutdown {
		m.shutdownAckOnce.Do(func() { close(m.shutdownAck) })
	}
}

// controlledShutdown asks the controller to move this broker's leaderships away and
// fence it, and waits (bounded by ctx and controlledShutdownWait) until it did. A
// raft leader then hands leadership to another voter.
func (m *Module) controlledShutdown(ctx context.Context) {
	if !m.networked() || !m.registered.Load() {
		return
	}
	im := m.hub.image()
	others := slices.ContainsFunc(liveBrokers(im), func(id int32) bool { return id != m.nodeID })
	if others {
		ctx, cancel := context.WithTimeout(ctx, controlledShutdownWait)
		defer cancel()
		m.wantShutdown.Store(true)
		select {
		case m.hbKick <- struct{}{}:
		default:
		}
		// Wait for the controller's go-ahead; give up when the controller stays
		// unreachable (the whole cluster may be stopping) or time runs out.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-m.shutdownAck:
				m.log.Info("controlled shutdown: leaderships moved")
				break wait
			case <-ctx.Done():
				m.log.Warn("controlled shutdown: controller did not confirm in time; stopping anyway")
				break wait
			case <-tick.C:
				if m.shutdownFailures.Load() >= 3 {
					m.log.Warn("controlled shutdown: no controller reachable; stopping anyway")
					break wait
				}
			}
		}
	}
	if r := m.raft.Load(); r != nil && r.State() == raft.Leader && len(m.voters) > 1 {
		if err := m.await(ctx, r.LeadershipTransfer()); err != nil {
			m.log.Warn("raft leadership transfer", "err", err)
		}
	}
}

// joinAsObserver asks the controller to add this broker to the raft configuration as a
// non-voter; raft then replicates the log to it.
func (m *Module) joinAsObserver(ctx context.Context) error {
	req := &rpc.AddObserverRequest{NodeID: m.nodeID, Address: string(m.trans.LocalAddr())}
	for {
		err := m.addObserver(ctx, req)
		if err == nil || !errors.Is(err, ErrNotController) || ctx.Err() != nil {
			return err
		}
		m.log.Info("waiting for a metadata controller to join", "err", err)
	}
}

func (m *Module) addObserver(ctx context.Context, req *rpc.AddObserverRequest) error {
	return m.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" {
			return false, fmt.Errorf("a non-voter became raft leader: %w", ErrConfig)
		}
		body, err := m.rpc.Call(ctx, addr, rpc.KeyAddObserver, rpc.VerAddObserver, req.AppendTo(nil))
		if err != nil {
			// Adding is idempotent: retry even when the request may have been executed.
			return true, err
		}
		resp, err := rpc.DecodeAddObserverResponse(body)
		if err != nil {
			return false, err
		}
		switch resp.ErrorCode {
		case 0:
			return false, nil
		case kerr.NotController.Code, kerr.RequestTimedOut.Code:
			return true, ErrNotController
		}
		return false, fmt.Errorf("join as non-voter: %w", kerr.ErrorForCode(resp.ErrorCode))
	})
}

// ----- controller side -----

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

// controllerState is the active controller's memory. Guarded by mu.
type controllerState struct {
	mu       sync.Mutex
	sessions map[int32]*brokerSession
	kick     chan struct{}
}

func newControllerState() *controllerState {
	return &controllerState{sessions: map[int32]*brokerSession{}, kick: make(chan struct{}, 1)}
}

func (c *controllerState) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// reset forgets every session (a new term).
func (c *controllerState) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sessions = map[int32]*brokerSession{}
}

// session returns the session of node at epoch, starting one (lastSeen now) if the
// epoch changed. c.mu must be held.
func (c *controllerState) session(node int32, epoch uint64, now time.Time) *brokerSession {
	s := c.sessions[node]
	if s == nil || s.epoch != epoch {
		s = &brokerSession{epoch: epoch, lastSeen: now, offset: -1}
		c.sessions[node] = s
	}
	return s
}

// ctlRegister serves BrokerRegistration on the controller: it writes a RegisterBroker
// entry (unfenced) and answers the entry's index as the broker epoch.
func (m *Module) ctlRegister(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = -1
	if !m.isLeader() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	im := m.hub.image()
	if req.ClusterID != "" && im.ClusterID != "" && req.ClusterID != im.ClusterID {
		m.log.Warn("refused broker registration: cluster id mismatch", "node", req.BrokerID, "cluster_id", req.ClusterID)
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
		reg := m.hub.state().Regs[req.BrokerID]
		_, sessionTimeout := m.lifecycleIntervals()
		m.ctl.mu.Lock()
		s := m.ctl.sessions[req.BrokerID]
		// Only a session this controller heard from counts: the grace session a new
		// controller starts for every broker does not (a lone broker restarting is its
		// own new controller and must not wait for its old session).
		live := s != nil && s.heard && s.epoch == reg.Epoch && time.Since(s.lastSeen) <= sessionTimeout
		m.ctl.mu.Unlock()
		if live && reg.Incarnation != image.UUID(req.IncarnationID) {
			m.log.Info("refused broker registration: the node's previous incarnation is still live", "node", req.BrokerID)
			resp.ErrorCode = kerr.DuplicateBrokerRegistration.Code
			return resp
		}
	}
	if old := im.Brokers[req.BrokerID]; old != nil && !old.Fenced && m.hub.state().Regs[req.BrokerID].Incarnation != image.UUID(req.IncarnationID) {
		m.leaveISRs(ctx, req.BrokerID)
	}
	rec := &image.RegisterBrokerRecord{NodeID: req.BrokerID, Incarnation: req.IncarnationID, Rack: derefOr(req.Rack, "")}
	for _, l := range req.Listeners {
		rec.Endpoints = append(rec.Endpoints, image.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	_, res, errs := m.proposeLocal(ctx, []image.Record{rec})
	if errs[0] != nil {
		resp.ErrorCode, _ = errCode(errs[0])
		return resp
	}
	resp.BrokerEpoch = int64(res[0].Index)
	m.ctl.mu.Lock()
	s := m.ctl.session(req.BrokerID, res[0].Index, time.Now())
	s.heard = true
	m.ctl.mu.Unlock()
	m.ctl.wake() // offline partitions it replicates may get a leader
	m.log.Info("registered broker", "node", req.BrokerID, "epoch", resp.BrokerEpoch, "incarnation", image.UUID(req.IncarnationID).String())
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
func (m *Module) leaveISRs(ctx context.Context, node int32) {
	for try := 0; try < 3; try++ {
		im := m.hub.image()
		recs := electLeadersWithout(im, m.uncleanElection(im), node)
		if len(recs) == 0 {
			return
		}
		_, _, errs := m.proposeLocal(ctx, recs)
		stale := false
		for i, err := range errs {
			switch {
			case err == nil:
				m.logPartitionChange(im, recs[i].(*image.PartitionChangeRecord))
			case errors.Is(err, image.ErrStale):
				stale = true
			default:
				m.log.Warn("taking a re-registering broker out of the ISRs", "node", node, "err", err)
				return
			}
		}
		m.log.Info("a new incarnation replaces a broker that was not fenced: it left the ISRs", "node", node, "changes", len(recs))
		if !stale {
			return
		}
	}
}

// ctlHeartbeat serves BrokerHeartbeat on the controller.
func (m *Module) ctlHeartbeat(req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	r := m.raft.Load()
	if r == nil || r.State() != raft.Leader {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	st := m.hub.state()
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
	m.ctl.mu.Lock()
	s := m.ctl.session(req.BrokerID, epoch, now)
	s.lastSeen, s.heard, s.offset = now, true, req.CurrentMetadataOffset
	caughtUp := req.CurrentMetadataOffset >= 0 && uint64(req.CurrentMetadataOffset) >= min(commit, st.Image.Version)
	if caughtUp {
		s.caughtUp = now
	}
	wake := s.wantShutdown != req.WantShutdown || b.Fenced != req.WantShutdown
	s.wantShutdown = req.WantShutdown
	m.ctl.mu.Unlock()
	if wake {
		m.ctl.wake()
	}
	resp.IsCaughtUp, resp.IsFenced = caughtUp, b.Fenced
	resp.ShouldShutdown = req.WantShutdown && b.Fenced && !leadsAny(st.Image, req.BrokerID)
	return resp
}

// ctlAddObserver adds a broker to the raft configuration as a non-voter.
func (m *Module) ctlAddObserver(ctx context.Context, req *rpc.AddObserverRequest) *rpc.AddObserverResponse {
	resp := &rpc.AddObserverResponse{LeaderID: m.leaderID()}
	r := m.raft.Load()
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
	if err := m.await(ctx, f); err != nil {
		resp.ErrorCode, _ = errCode(mapRaftErr(err))
		return resp
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id && s.Suffrage == raft.Voter {
			m.log.Warn("refused non-voter: node id is a voter", "node", req.NodeID, "address", req.Address)
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp
		}
		if s.ID == id && s.Address == raft.ServerAddress(req.Address) {
			return resp // already there
		}
	}
	if err := m.await(ctx, r.AddNonvoter(id, raft.ServerAddress(req.Address), 0, 10*time.Second)); err != nil {
		resp.ErrorCode, _ = errCode(mapRaftErr(err))
		return resp
	}
	m.log.Info("added raft non-voter", "node", req.NodeID, "address", req.Address)
	return resp
}

// leadsAny reports whether node leads a partition.
func leadsAny(im *kernel.Image, node int32) bool {
	for _, t := range im.Topics {
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
func (m *Module) controllerLoop(ctx context.Context, r *raft.Raft) {
	hb, _ := m.lifecycleIntervals()
	tick := min(max(hb/2, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var scanned uint64 // image version the last election scan saw
	lastBalance, lastLook := time.Now(), time.Now()
	for {
		if r.State() != raft.Leader {
			return
		}
		scanned = m.controllerTick(ctx, scanned)
		// leader.imbalance.check.interval.seconds is at least 1: the broker configs (which
		// may change) are resolved at most once a second.
		if now := time.Now(); now.Sub(lastLook) >= time.Second {
			lastLook = now
			s := m.brokerSettings(m.hub.image())
			if now.Sub(lastBalance) >= time.Duration(s.LeaderImbalanceCheckIntervalSeconds)*time.Second {
				lastBalance = now
				if s.AutoLeaderRebalanceEnable {
					m.rebalanceLeaders(ctx, s.LeaderImbalancePerBrokerPercentage)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.ctl.kick:
		}
	}
}

// controllerTick fences and unfences, then elects leaders unless the image is still
// the one the previous scan saw (scanned); it returns the version it scanned.
func (m *Module) controllerTick(ctx context.Context, scanned uint64) uint64 {
	_, sessionTimeout := m.lifecycleIntervals()
	now := time.Now()
	st := m.hub.state()
	var recs []image.Record
	m.ctl.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(st.Image.Brokers)) {
		b, epoch := st.Image.Brokers[id], st.Regs[id].Epoch
		s := m.ctl.session(id, epoch, now)
		expired := now.Sub(s.lastSeen) > sessionTimeout
		switch {
		case !b.Fenced && (expired || s.wantShutdown):
			m.log.Info("fencing broker", "node", id, "epoch", epoch, "session_expired", expired, "controlled_shutdown", s.wantShutdown)
			recs = append(recs, &image.FenceBrokerRecord{NodeID: id, Epoch: epoch})
		case b.Fenced && s.heard && !expired && !s.wantShutdown:
			m.log.Info("unfencing broker", "node", id, "epoch", epoch)
			recs = append(recs, &image.UnfenceBrokerRecord{NodeID: id, Epoch: epoch})
		}
	}
	m.ctl.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if len(recs) > 0 {
		if _, _, errs := m.proposeLocal(ctx, recs); errors.Join(errs...) != nil {
			m.log.Debug("fence/unfence entries", "err", errors.Join(errs...))
		}
	}
	im := m.hub.image()
	if im.Version == scanned {
		return scanned
	}
	changes := electLeaders(im, m.uncleanElection(im))
	if len(changes) == 0 {
		// Liveness first; reassignments complete on a partition that needs no repair.
		changes = completeReassignments(im)
	}
	if len(changes) > 0 {
		_, _, errs := m.proposeLocal(ctx, changes)
		moved := 0
		for i, err := range errs {
			if err == nil {
				moved++
				m.logPartitionChange(im, changes[i].(*image.PartitionChangeRecord))
			}
		}
		m.log.Info("changed partitions (broker liveness, reassignments)", "changes", moved, "proposed", len(changes))
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
	for _, name := range slices.Sorted(maps.Keys(im.Topics)) {
		t := im.Topics[name]
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
func (m *Module) uncleanElection(im *kernel.Image) func(*kernel.TopicImage) bool {
	merged := m.mergedBrokerConfigs(im)
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
func (m *Module) logPartitionChange(im *kernel.Image, r *image.PartitionChangeRecord) {
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
		m.log.Warn("unclean leader election: records acknowledged by the old ISR may be lost", args...)
		return
	}
	m.log.Debug("partition changed", args...)
}
