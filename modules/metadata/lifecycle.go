package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// Broker lifecycle (see doc.go, "Brokers"), this broker's side: registration,
// heartbeats and controlled shutdown. The controller's side is in sessions.go.

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
func (nd *node) lifecycleIntervals() (heartbeat, session time.Duration) {
	get := func(name string, def int64) time.Duration {
		if v, ok := nd.kctx.Broker().StaticConfigs[name]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				return time.Duration(n) * time.Millisecond
			}
		}
		return time.Duration(def) * time.Millisecond
	}
	return get("broker.heartbeat.interval.ms", defaultHeartbeatIntervalMs), get("broker.session.timeout.ms", defaultSessionTimeoutMs)
}

// lifecycle is this broker's side of the broker lifecycle: it registers with the
// controller at Start (a new incarnation each start), heartbeats until Stop, and asks
// for a controlled shutdown at Stop. It talks to the controller over the node (the RPC,
// or locally when this node is the controller).
//
// Lock order: lifecycle has no mutex of its own; its state is atomics and channels.
type lifecycle struct {
	*node
	ctl              *controller // answers locally when this node is the controller
	registered       atomic.Bool
	incarnation      image.UUID   // chosen anew at each Start
	brokerEpoch      atomic.Int64 // this broker's registration epoch
	wantShutdown     atomic.Bool  // controlled shutdown asked
	hbKick           chan struct{}
	shutdownAck      chan struct{} // closed when the controller says "shut down"
	shutdownAckOnce  sync.Once
	shutdownFailures atomic.Int32 // heartbeats with WantShutdown that reached no controller
	pauseHeartbeats  atomic.Bool  // test hook: a broker that stops heartbeating
}

func newLifecycle(n *node, ctl *controller) *lifecycle {
	return &lifecycle{node: n, ctl: ctl, hbKick: make(chan struct{}, 1), shutdownAck: make(chan struct{})}
}

// ----- broker side -----

// register registers this broker with the controller (a new incarnation each process
// start, chosen in Start) once the log has a cluster id, and returns when the image
// holds the registration.
func (l *lifecycle) register(ctx context.Context) error {
	bi := l.kctx.Broker() // now: listener ports are bound
	if err := l.hub.waitFor(ctx, func(im *kernel.Image) bool { return im.ClusterID != "" && im.ControllerID >= 0 }); err != nil {
		return err
	}
	if im := l.hub.image(); bi.ClusterID != "" && bi.ClusterID != im.ClusterID {
		return fmt.Errorf("configured %s, log has %s: %w", bi.ClusterID, im.ClusterID, ErrClusterIDMismatch)
	}
	// Start waits for a quorum as long as its ctx allows: a broker started before the
	// others of its cluster keeps trying.
	var epoch int64
	for {
		var err error
		if epoch, err = l.sendRegistration(ctx); err == nil {
			break
		}
		if !errors.Is(err, ErrNotController) || ctx.Err() != nil {
			return err
		}
		l.log.Info("waiting for a metadata controller to register with", "err", err)
	}
	err := l.hub.waitFor(ctx, func(im *kernel.Image) bool {
		return im.Version >= uint64(epoch) && im.Brokers[l.nodeID] != nil && l.hub.state().Regs[l.nodeID].Incarnation == l.incarnation
	})
	if err != nil {
		return err
	}
	l.registered.Store(true)
	return nil
}

// registrationRequest is this broker's BrokerRegistration.
func (l *lifecycle) registrationRequest() *kmsg.BrokerRegistrationRequest {
	bi := l.kctx.Broker()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = rpc.VerBrokerRegistration
	req.BrokerID, req.ClusterID, req.IncarnationID = l.nodeID, l.hub.image().ClusterID, l.incarnation
	req.Rack = rackPtr(bi.Rack)
	req.PreviousBrokerEpoch = -1
	req.Features = l.featureRanges()
	for _, l := range bi.Listeners {
		rl := kmsg.NewBrokerRegistrationRequestListener()
		rl.Name, rl.Host, rl.Port = l.Name, l.Host, uint16(l.Port)
		req.Listeners = append(req.Listeners, rl)
	}
	return req
}

// sendRegistration registers with the controller and returns the broker epoch.
func (l *lifecycle) sendRegistration(ctx context.Context) (int64, error) {
	req := l.registrationRequest()
	local := func(ctx context.Context) *kmsg.BrokerRegistrationResponse { return l.ctl.ctlRegister(ctx, req) }
	resp, err := askController(ctx, l.node, req, local, func(resp *kmsg.BrokerRegistrationResponse) (bool, error) {
		switch resp.ErrorCode {
		case 0:
			return false, nil
		case kerr.NotController.Code:
			return true, ErrNotController
		case kerr.DuplicateBrokerRegistration.Code:
			// The previous incarnation's session has not expired yet: retry.
			return true, fmt.Errorf("%w: the previous incarnation of node %d is still registered and live", ErrNotController, l.nodeID)
		case kerr.InconsistentClusterID.Code:
			return false, ErrClusterIDMismatch
		case kerr.UnsupportedVersion.Code:
			// The answer carries no message: say why from this broker's image.
			why := "the controller refused this broker's feature levels"
			if _, w := registrationFeatures(l.hub.image(), req.Features); w != "" {
				why = w
			}
			return false, fmt.Errorf("%w: %s", ErrUnsupportedFeatures, why)
		case kerr.RequestTimedOut.Code:
			return false, context.DeadlineExceeded
		}
		return false, fmt.Errorf("registration: %w", kerr.ErrorForCode(resp.ErrorCode))
	})
	if err != nil {
		return 0, err
	}
	l.brokerEpoch.Store(resp.BrokerEpoch)
	return resp.BrokerEpoch, nil
}

// askController sends req to the controller until an answer needs no retry (see
// withController): local serves it when this broker is the controller, otherwise it
// goes over the controller RPC, a retry when it was not sent. judge reads an answer:
// whether to retry (NOT_CONTROLLER, say) and the error to return or retry with.
func askController[R kmsg.Response](ctx context.Context, nd *node, req kmsg.Request,
	local func(context.Context) R, judge func(R) (retry bool, err error),
) (R, error) {
	var resp R
	err := nd.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" {
			resp = local(ctx)
		} else {
			r, err := nd.rpc.CallKmsg(ctx, addr, req)
			if err != nil {
				return errors.Is(err, rpc.ErrNotSent), err
			}
			resp = r.(R)
		}
		return judge(resp)
	})
	return resp, err
}

// heartbeatLoop sends a BrokerHeartbeat every broker.heartbeat.interval.ms (more often
// during a controlled shutdown), re-registering when the controller no longer knows
// this registration.
func (l *lifecycle) heartbeatLoop(ctx context.Context) {
	interval, _ := l.lifecycleIntervals()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-l.hbKick:
		}
		l.heartbeatOnce(ctx, interval)
		next := interval
		if l.wantShutdown.Load() {
			next = min(interval, 50*time.Millisecond)
		}
		t.Reset(next)
	}
}

func (l *lifecycle) heartbeatOnce(ctx context.Context, interval time.Duration) {
	if l.pauseHeartbeats.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, max(interval, time.Second))
	defer cancel()
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.Version = rpc.VerBrokerHeartbeat
	req.BrokerID, req.BrokerEpoch = l.nodeID, l.brokerEpoch.Load()
	req.CurrentMetadataOffset = int64(l.hub.image().Version)
	req.WantShutdown = l.wantShutdown.Load()
	local := func(context.Context) *kmsg.BrokerHeartbeatResponse { return l.ctl.ctlHeartbeat(req) }
	resp, err := askController(ctx, l.node, req, local, func(resp *kmsg.BrokerHeartbeatResponse) (bool, error) {
		if resp.ErrorCode == kerr.NotController.Code {
			return true, ErrNotController
		}
		return false, nil // the other codes are read below
	})
	if err != nil {
		if !errors.Is(err, ErrNotRunning) {
			l.log.Debug("broker heartbeat failed", "err", err)
		}
		if req.WantShutdown {
			l.shutdownFailures.Add(1)
		}
		return
	}
	switch resp.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code, kerr.BrokerIDNotRegistered.Code:
		// The controller knows a newer (or no) registration of this node: register
		// again, same incarnation.
		l.log.Info("re-registering with the controller", "reason", kerr.ErrorForCode(resp.ErrorCode))
		if _, err := l.sendRegistration(ctx); err != nil {
			l.log.Warn("re-registration failed", "err", err)
		}
		return
	default:
		l.log.Warn("broker heartbeat refused", "err", kerr.ErrorForCode(resp.ErrorCode))
		return
	}
	if resp.ShouldShutdown {
		l.shutdownAckOnce.Do(func() { close(l.shutdownAck) })
	}
}

// controlledShutdown asks the controller to move this broker's leaderships away and
// fence it, and waits (bounded by ctx and controlledShutdownWait) until it did. A
// raft leader then hands leadership to another voter.
func (l *lifecycle) controlledShutdown(ctx context.Context) {
	if !l.networked() || !l.registered.Load() {
		return
	}
	im := l.hub.image()
	others := slices.ContainsFunc(liveBrokers(im), func(id int32) bool { return id != l.nodeID })
	if others {
		ctx, cancel := context.WithTimeout(ctx, controlledShutdownWait)
		defer cancel()
		l.wantShutdown.Store(true)
		select {
		case l.hbKick <- struct{}{}:
		default:
		}
		// Wait for the controller's go-ahead; give up when the controller stays
		// unreachable (the whole cluster may be stopping) or time runs out.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-l.shutdownAck:
				l.log.Info("controlled shutdown: leaderships moved")
				break wait
			case <-ctx.Done():
				l.log.Warn("controlled shutdown: controller did not confirm in time; stopping anyway")
				break wait
			case <-tick.C:
				if l.shutdownFailures.Load() >= 3 {
					l.log.Warn("controlled shutdown: no controller reachable; stopping anyway")
					break wait
				}
			}
		}
	}
	if r := l.raft.Load(); r != nil && r.State() == raft.Leader && len(l.voters) > 1 {
		if err := l.await(ctx, r.LeadershipTransfer()); err != nil {
			l.log.Warn("raft leadership transfer", "err", err)
		}
	}
}

// joinAsObserver asks the controller to add this broker to the raft configuration as a
// non-voter; raft then replicates the log to it.
func (l *lifecycle) joinAsObserver(ctx context.Context) error {
	req := &rpc.AddObserverRequest{NodeID: l.nodeID, Address: string(l.trans.LocalAddr())}
	for {
		err := l.addObserver(ctx, req)
		if err == nil || !errors.Is(err, ErrNotController) || ctx.Err() != nil {
			return err
		}
		l.log.Info("waiting for a metadata controller to join", "err", err)
	}
}

func (l *lifecycle) addObserver(ctx context.Context, req *rpc.AddObserverRequest) error {
	return l.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" {
			return false, fmt.Errorf("a non-voter became raft leader: %w", ErrConfig)
		}
		body, err := l.rpc.Call(ctx, addr, rpc.KeyAddObserver, rpc.VerAddObserver, req.AppendTo(nil))
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
