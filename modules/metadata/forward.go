package metadata

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// Forwarding (see doc.go, "Controller RPC"). A broker that is not the raft leader sends
// the encoded records it would propose to the controller, which proposes them as its
// own and answers each record's outcome and the index of the last one applied.
//
// Invariant: forwarding records, not client requests, is safe because Apply re-validates
// every record on every broker against the image at its index: a record planned on a
// stale image (a topic since created, a partition count since changed, a broker since
// re-registered) is rejected by Apply everywhere alike, and the proposer gets that
// verdict back. The controller trusts nothing in a forwarded record that Apply does not
// check.

// defaultControllerWait bounds the search for a reachable controller when the caller's
// ctx has no deadline.
const defaultControllerWait = 15 * time.Second

// maxForwardTimeout caps the time a controller spends on one forwarded request.
const maxForwardTimeout = 5 * time.Minute

// forwardErrs are the per-record outcomes a forward response can carry; a record's code
// is its index here (0 = accepted). Frozen: append only.
var forwardErrs = []error{
	nil,
	ErrNotController,
	ErrNotRunning,
	context.DeadlineExceeded,
	image.ErrTopicExists,
	image.ErrUnknownTopic,
	image.ErrUnknownBroker,
	image.ErrStale,
	image.ErrClusterIDSet,
	image.ErrInvalidEntry,
	image.ErrProducerIDsExhausted,
	image.ErrInvalidProducerIDCount,
	image.ErrInvalidExtension,
	context.Canceled,
	image.ErrNotLeader,
	image.ErrFencedLeaderEpoch,
	image.ErrIneligibleReplica,
	image.ErrUnsupportedFeature,
	image.ErrBrokerLive,
}

// forwardCodeOther is the code of an error not in forwardErrs.
const forwardCodeOther int16 = -1

func forwardCode(err error) int16 {
	if err == nil {
		return 0
	}
	for i, e := range forwardErrs[1:] {
		if errors.Is(err, e) {
			return int16(i + 1)
		}
	}
	return forwardCodeOther
}

// forwardError turns a forwarded record's code and message back into an error that
// matches the same sentinel with errors.Is.
func forwardError(code int16, msg string) error {
	switch {
	case code == 0:
		return nil
	case code > 0 && int(code) < len(forwardErrs):
		return fmt.Errorf("%w (controller: %s)", forwardErrs[code], msg)
	}
	return fmt.Errorf("controller: %s", msg)
}

// networked reports whether this broker talks to other raft servers (a TCP transport).
func (nd *node) networked() bool { return nd.mux != nil }

// isLeader reports whether this broker is the raft leader.
func (nd *node) isLeader() bool {
	r := nd.raft.Load()
	return r != nil && r.State() == raft.Leader
}

// leaderID is the raft leader's node id, or -1.
func (nd *node) leaderID() int32 {
	r := nd.raft.Load()
	if r == nil {
		return -1
	}
	_, id := r.LeaderWithID()
	n, err := strconv.ParseInt(string(id), 10, 32)
	if id == "" || err != nil {
		return -1
	}
	return int32(n)
}

// controllerAddr picks the address to try on attempt n: the raft leader when this
// broker knows it, otherwise the voters in turn (one that is not the controller
// answers NOT_CONTROLLER and the next is tried).
func (nd *node) controllerAddr(n int) string {
	if r := nd.raft.Load(); r != nil {
		if addr, _ := r.LeaderWithID(); addr != "" && n%4 != 3 {
			return string(addr)
		}
	}
	var others []voter
	for _, v := range nd.voters {
		if v.ID != nd.nodeID {
			others = append(others, v)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return others[n%len(others)].Addr
}

// withController runs do against the controller until it does not ask for a retry:
// locally (addr "") when this broker is the raft leader, otherwise over the controller
// RPC. do returns retry=true when the request surely had no effect (not sent, or
// NOT_CONTROLLER). Without a controller within ctx's deadline (defaultControllerWait
// without one) it returns an error wrapping ErrNotController.
func (nd *node) withController(ctx context.Context, do func(ctx context.Context, addr string) (retry bool, err error)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultControllerWait)
		defer cancel()
	}
	backoff := 5 * time.Millisecond
	var last error
	for n := 0; ; n++ {
		if nd.isStopped() {
			return ErrNotRunning
		}
		addr := ""
		if !nd.isLeader() {
			addr = nd.controllerAddr(n)
		}
		if addr != "" || nd.isLeader() {
			retry, err := do(ctx, addr)
			if !retry {
				return err
			}
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return fmt.Errorf("%w: no controller reachable: %v", ErrNotController, last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

func (nd *node) isStopped() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.stopped
}

// forwardAll is proposeAllResults on a broker that is not the controller.
func (nd *node) forwardAll(ctx context.Context, recs []image.Record) (*kernel.Image, []image.ApplyResult, []error) {
	errs := make([]error, len(recs))
	results := make([]image.ApplyResult, len(recs))
	req := &rpc.ForwardRequest{}
	var at []int
	for i, rec := range recs {
		data, err := image.EncodeRecord(rec)
		if err != nil {
			errs[i] = err
			continue
		}
		req.Entries = append(req.Entries, data)
		at = append(at, i)
	}
	fail := func(err error) (*kernel.Image, []image.ApplyResult, []error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return nd.hub.image(), results, errs
	}
	if len(at) == 0 {
		return nd.hub.image(), results, errs
	}
	var resp *rpc.ForwardResponse
	var local struct {
		res  []image.ApplyResult
		errs []error
	}
	err := nd.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" { // became the controller meanwhile
			_, local.res, local.errs = nd.proposeLocal(ctx, recs)
			return false, nil
		}
		req.TimeoutMs = 0
		if d, ok := ctx.Deadline(); ok {
			req.TimeoutMs = int32(min(time.Until(d).Milliseconds(), math.MaxInt32))
			if req.TimeoutMs <= 0 { // out of time before anything was sent
				return true, context.DeadlineExceeded
			}
		}
		fr, retry, err := nd.sendForward(ctx, addr, req)
		if err != nil {
			return retry, err
		}
		if len(fr.Results) != len(req.Entries) {
			return false, fmt.Errorf("%w: %d results for %d entries", rpc.ErrFrame, len(fr.Results), len(req.Entries))
		}
		resp = fr
		return false, nil
	})
	if err != nil {
		return fail(err)
	}
	if local.errs != nil {
		return nd.hub.image(), local.res, local.errs
	}
	for j, i := range at {
		r := resp.Results[j]
		errs[i] = forwardError(r.Code, r.Message)
		if errs[i] == nil {
			results[i] = image.ApplyResult{Index: uint64(r.Index), FirstProducerID: r.FirstProducerID}
			nd.logApplied(recs[i], uint64(r.Index))
		}
	}
	// Read-your-writes: the caller's image must hold what the controller applied.
	idx := uint64(max(resp.AppliedIndex, 0))
	if err := nd.hub.waitFor(ctx, func(im *kernel.Image) bool { return im.Version >= idx }); err != nil {
		return fail(err)
	}
	return nd.hub.image(), results, errs
}

// catchUp waits until this broker's image holds everything the controller had applied
// when asked: a read barrier, sent as a forward request with no entries. A broker that
// is not the controller plans admin writes on its own image, which trails the
// controller's by a commit round trip (a broker registered a moment ago is missing
// from it); planning again after catchUp sees what the controller saw. On the
// controller it returns at once.
func (nd *node) catchUp(ctx context.Context) error {
	var idx uint64
	err := nd.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" {
			return false, nil
		}
		fr, retry, err := nd.sendForward(ctx, addr, &rpc.ForwardRequest{})
		if err != nil {
			return retry, err
		}
		idx = uint64(max(fr.AppliedIndex, 0))
		return false, nil
	})
	if err != nil {
		return err
	}
	return nd.hub.waitFor(ctx, func(im *kernel.Image) bool { return im.Version >= idx })
}

// replanAfterCatchUp reports whether a plan that failed in a way a stale image explains
// (stale) is worth making again: this broker is not the controller and has caught up
// with it. The plan's answer stands otherwise.
func (nd *node) replanAfterCatchUp(ctx context.Context, stale bool) bool {
	if !stale || nd.isLeader() {
		return false
	}
	if err := nd.catchUp(ctx); err != nil {
		nd.log.Debug("could not catch up with the controller to plan again", "err", err)
		return false
	}
	return true
}

// sendForward sends req to the controller at addr and returns its answer. retry reports
// whether another controller may be tried: nothing was sent, or addr is no longer the
// controller.
func (nd *node) sendForward(ctx context.Context, addr string, req *rpc.ForwardRequest) (resp *rpc.ForwardResponse, retry bool, err error) {
	body, err := nd.rpc.Call(ctx, addr, rpc.KeyForward, rpc.VerForward, req.AppendTo(nil))
	if err != nil {
		if errors.Is(err, rpc.ErrNotSent) {
			return nil, true, err
		}
		// The controller may have applied it: report a timeout, as Kafka does when a
		// forwarded request gets no answer.
		return nil, false, fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
	}
	fr, err := rpc.DecodeForwardResponse(body)
	switch {
	case err != nil:
		return nil, false, err
	case fr.ErrorCode == kerr.NotController.Code:
		return nil, true, fmt.Errorf("%w: %s answered NOT_CONTROLLER", ErrNotController, addr)
	case fr.ErrorCode != 0:
		return nil, false, fmt.Errorf("controller %s: %w", addr, kerr.ErrorForCode(fr.ErrorCode))
	}
	return fr, false, nil
}

// serveForward proposes a forwarded request's records on the controller; a request with
// no records is catchUp's barrier and gets the controller's applied index.
func (c *controller) serveForward(ctx context.Context, req *rpc.ForwardRequest) *rpc.ForwardResponse {
	resp := &rpc.ForwardResponse{LeaderID: c.leaderID()}
	if !c.isLeader() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 || timeout > maxForwardTimeout {
		timeout = rpc.CallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(req.Entries) == 0 {
		// A read barrier (catchUp): the index this controller has applied.
		resp.AppliedIndex = int64(c.hub.image().Version)
		return resp
	}
	resp.Results = make([]rpc.ForwardResult, len(req.Entries))
	var recs []image.Record
	var at []int
	for i, e := range req.Entries {
		rec, err := image.DecodeRecord(e)
		if err != nil {
			c.log.Warn("refused forwarded metadata entry", "err", err)
			resp.Results[i] = rpc.ForwardResult{Code: forwardCode(image.ErrInvalidEntry), Message: err.Error()}
			continue
		}
		recs = append(recs, rec)
		at = append(at, i)
	}
	if len(recs) > 0 {
		_, res, errs := c.proposeLocal(ctx, recs)
		for j, i := range at {
			fr := rpc.ForwardResult{Code: forwardCode(errs[j]), Index: int64(res[j].Index), FirstProducerID: res[j].FirstProducerID}
			if errs[j] != nil {
				fr.Message = errs[j].Error()
			}
			resp.AppliedIndex = max(resp.AppliedIndex, int64(res[j].Index))
			resp.Results[i] = fr
		}
	}
	return resp
}
