package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// Defaults for Config fields left zero.
const (
	DefaultTimeout        = 2 * time.Second
	DefaultInstances      = 2
	DefaultMaxOutputBytes = 16 << 20
	// MaxOutputTopics is the number of outputs a derived transform can have.
	MaxOutputTopics = 8
)

// Config configures a pool of instances of one program.
type Config struct {
	Name, InputTopic string
	// OutputTopics are a derived transform's outputs (index 0..7); nil for an
	// inline transform, whose only output (0) is the input topic.
	OutputTopics []string
	// Timeout bounds one batch (default 2s). The start of a new instance
	// (up to its first request for a batch) is bounded separately, by
	// max(5*Timeout, 10s).
	Timeout time.Duration
	// Instances is the pool size (default 2).
	Instances int
	// MaxOutputBytes bounds the output of one batch (default 16 MiB).
	MaxOutputBytes int
	// Env is added to the guest's environment (it cannot override the
	// variables the host sets).
	Env map[string]string
	// Log receives the guest's stdout and stderr lines (nil: discarded).
	Log *slog.Logger
}

// Batch is one input batch.
type Batch struct {
	Topic                                   string
	Partition                               int32
	BaseOffset, BaseTimestamp, MaxTimestamp int64
	Attributes                              int16
	ProducerID                              int64
	ProducerEpoch                           int16
	BaseSequence                            int32
	RecordCount                             int32
	// Records is the batch's uncompressed records section (Kafka v2 record
	// encoding, back to back).
	Records []byte
	// Source is who produced the batch (inline mode); the zero Source in
	// derived mode, where the producer is not known.
	Source Source
}

// Source is who produced a batch: the principal of the Produce request's
// connection (type and name, e.g. "User" and "alice") and its client id.
// Empty fields are unknown (or, for ClientID, not sent).
type Source struct {
	PrincipalType, PrincipalName, ClientID string
}

// Header is an output record header.
type Header struct {
	Key   string
	Value []byte
}

// Output is one output record.
type Output struct {
	// Index is the output: 0 is the input topic (inline) or OutputTopics[0].
	Index int
	// Key and Value are nil for null.
	Key, Value []byte
	Headers    []Header
	// TimestampDelta is relative to the input batch's BaseTimestamp.
	TimestampDelta int64
}

// Pool runs batches on up to Config.Instances instances of a program.
type Pool struct {
	prog    *Program
	cfg     Config
	modCfg  wazero.ModuleConfig
	outputs int
	logs    *logLimiter

	base    context.Context // parent of instance contexts; cancelled by Close
	cancel  context.CancelFunc
	idle    chan *instance // one slot per instance; nil: not started (or discarded)
	closing chan struct{}

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewPool returns a pool of instances of p. Instances start on first use.
func (p *Program) NewPool(ctx context.Context, cfg Config) (*Pool, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Instances <= 0 {
		cfg.Instances = DefaultInstances
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if len(cfg.OutputTopics) > MaxOutputTopics {
		return nil, fmt.Errorf("wasm: %d output topics, at most %d", len(cfg.OutputTopics), MaxOutputTopics)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	outputs := []string{cfg.InputTopic}
	if cfg.OutputTopics != nil {
		outputs = cfg.OutputTopics
	}

	env := map[string]string{
		"SLUICE_TRANSFORM_NAME": cfg.Name,
		"SLUICE_INPUT_TOPIC":    cfg.InputTopic,
	}
	for i, t := range outputs {
		env["SLUICE_OUTPUT_TOPIC_"+strconv.Itoa(i)] = t
	}
	if p.abi == ABIRedpanda {
		env["REDPANDA_INPUT_TOPIC"] = cfg.InputTopic
		for i, t := range outputs {
			env["REDPANDA_OUTPUT_TOPIC_"+strconv.Itoa(i)] = t
		}
	}
	for k, v := range cfg.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("wasm: invalid environment variable %q", k)
		}
		if _, ok := env[k]; !ok {
			env[k] = v
		}
	}
	keys := slices.Sorted(maps.Keys(env))

	// No FS, no sockets; clocks, sleep and randomness stay wazero's
	// deterministic defaults.
	modCfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(cfg.Name).
		WithStartFunctions("_start")
	for _, k := range keys {
		modCfg = modCfg.WithEnv(k, env[k])
	}

	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	pool := &Pool{
		prog:    p,
		cfg:     cfg,
		modCfg:  modCfg,
		outputs: len(outputs),
		logs:    newLogLimiter(logLinesPerSecond, logBurst),
		base:    base,
		cancel:  cancel,
		idle:    make(chan *instance, cfg.Instances),
		closing: make(chan struct{}),
	}
	for range cfg.Instances {
		pool.idle <- nil
	}
	return pool, nil
}

// request is one batch handed to an instance. resp receives exactly one
// result from the instance's goroutine, unless the caller gave up first.
type request struct {
	batch *Batch
	resp  chan result // capacity 1: the guest goroutine never blocks on it
	// keep: the outputs are consumed before the instance serves another batch
	// (TransformFunc), so the instance may reuse their memory.
	keep bool
}

type result struct {
	out []Output
	err error
}

var errClosed = &Error{Kind: KindClosed, Msg: "pool closed"}

// Transform runs one batch on an idle instance, waiting for one (bounded by
// ctx), and returns its outputs, which the caller owns. b is not used after it
// returns (the instance works on a copy of its records). A failed batch returns
// *Error. If ctx is cancelled while the batch runs, the instance is discarded
// and ctx's error returned.
func (p *Pool) Transform(ctx context.Context, b *Batch) ([]Output, error) {
	var outs []Output
	err := p.run(ctx, b, false, func(o []Output) error { outs = o; return nil })
	return outs, err
}

// TransformFunc is Transform for callers that consume the outputs at once: fn is
// called with them (when the batch succeeded) before the instance serves another
// batch, and they are valid only during fn, which lets the instance reuse their
// memory from batch to batch instead of allocating it for every batch. fn's error is
// returned.
func (p *Pool) TransformFunc(ctx context.Context, b *Batch, fn func([]Output) error) error {
	return p.run(ctx, b, true, fn)
}

// run serves one batch on an idle instance; see Transform and TransformFunc. With
// keep, fn runs before the instance goes back to the idle set.
func (p *Pool) run(ctx context.Context, b *Batch, keep bool, fn func([]Output) error) error {
	if b == nil {
		return errors.New("wasm: nil batch")
	}
	var inst *instance
	select {
	case inst = <-p.idle:
	case <-p.closing:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// This goroutine owns a slot until it puts an instance (or nil) back.
	if inst != nil && inst.dead() {
		inst = nil
	}
	if inst == nil {
		var err error
		if inst, err = p.start(); err != nil {
			p.idle <- nil
			return err
		}
		if err := p.awaitReady(ctx, inst); err != nil {
			return err
		}
	}

	// The instance reads the batch on its own goroutine, which can outlive this call
	// (a timeout, a cancelled ctx or a trap abandons it while the guest may still be
	// copying the input). The caller's records may alias a request buffer the kernel
	// reuses once the request is answered (kernel/framepool.go), so the instance gets
	// its own copy: one memcpy, small next to the guest's own copy into its memory.
	own := *b
	own.Records = bytes.Clone(b.Records)
	req := &request{batch: &own, resp: make(chan result, 1), keep: keep}
	inst.reqs <- req // never blocks: capacity 1 and one batch at a time
	timer := time.NewTimer(p.cfg.Timeout)
	defer timer.Stop()
	deliver := func(r result) error {
		if r.err != nil {
			return r.err
		}
		return fn(r.out)
	}
	select {
	case r := <-req.resp:
		err := deliver(r) // before the instance is released: its buffers back r.out
		if inst.dead() {
			p.discard(inst)
		} else {
			p.idle <- inst
		}
		return err
	case <-inst.done:
		p.discard(inst)
		select {
		case r := <-req.resp:
			return deliver(r)
		default:
		}
		if p.isClosed() {
			return errClosed
		}
		return &Error{Kind: KindTrap, Msg: inst.exitReason()}
	case <-timer.C:
		p.discard(inst)
		return &Error{Kind: KindTimeout, Msg: "batch not completed within " + p.cfg.Timeout.String()}
	case <-ctx.Done():
		p.discard(inst)
		return ctx.Err()
	}
}

// startTimeout bounds the start of an instance (instantiation and the guest's
// initialisation up to its first request for a batch), which does not count
// against the first batch's Timeout.
func (p *Pool) startTimeout() time.Duration {
	return max(5*p.cfg.Timeout, 10*time.Second)
}

// awaitReady waits for a new instance to ask for its first batch. On failure
// the instance is discarded.
func (p *Pool) awaitReady(ctx context.Context, inst *instance) error {
	timer := time.NewTimer(p.startTimeout())
	defer timer.Stop()
	select {
	case <-inst.ready:
		return nil
	case <-inst.done:
		p.discard(inst)
		if p.isClosed() {
			return errClosed
		}
		return &Error{Kind: KindTrap, Msg: "instance start: " + inst.exitReason()}
	case <-timer.C:
		p.discard(inst)
		return &Error{Kind: KindTimeout, Msg: "instance not started within " + p.startTimeout().String()}
	case <-ctx.Done():
		p.discard(inst)
		return ctx.Err()
	}
}

// discard ends inst (if it is still running) and frees its slot.
func (p *Pool) discard(inst *instance) {
	inst.cancel()
	p.idle <- nil
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close ends the pool's instances and waits for their goroutines (bounded by
// ctx). Batches in progress fail with KindClosed.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
		p.cancel()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// instance is one running module instance. The fields after the marker are
// owned by the guest goroutine (host functions run on it).
type instance struct {
	pool   *Pool
	ctx    context.Context
	cancel context.CancelFunc
	reqs   chan *request // capacity 1
	ready  chan struct{} // closed when the guest first waits for a batch
	done   chan struct{} // closed when the guest has ended
	err    error         // why the guest ended; written before done is closed

	// --- owned by the guest goroutine ---
	waited    bool     // ready is closed
	cur       *request // the batch being served, nil between batches
	delivered bool     // cur has been handed to the guest
	out       outBuilder
	scratch   []byte

	// Redpanda ABI
	recs    []inRecord // cur's records
	next    int        // next record for read_next_record
	tsDelta int64      // timestamp delta of the last record read
}

type instanceKey struct{}

func (p *Pool) start() (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	ctx, cancel := context.WithCancel(p.base)
	inst := &instance{
		pool:   p,
		cancel: cancel,
		reqs:   make(chan *request, 1),
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	inst.ctx = context.WithValue(ctx, instanceKey{}, inst)
	p.wg.Add(1)
	go inst.run()
	return inst, nil
}

func (inst *instance) dead() bool {
	select {
	case <-inst.done:
		return true
	default:
		return false
	}
}

func (inst *instance) exitReason() string {
	if inst.err == nil {
		return "guest ended"
	}
	return truncate(inst.err.Error(), 512)
}

// run instantiates the module and runs _start, which loops in the host's
// next-batch function until the instance is cancelled or the guest ends.
func (inst *instance) run() {
	p := inst.pool
	defer p.wg.Done()
	defer inst.cancel()
	stdout := newLineWriter(p.cfg.Log, p.logs, p.cfg.Name, "stdout")
	stderr := newLineWriter(p.cfg.Log, p.logs, p.cfg.Name, "stderr")
	cfg := p.modCfg.WithStdout(stdout).WithStderr(stderr)
	if p.prog.stoppable {
		cfg = cfg.WithStartFunctions() // run by runStart
	}
	mod, err := p.prog.rt.InstantiateModule(inst.ctx, p.prog.compiled, cfg)
	if err == nil && p.prog.stoppable {
		err = inst.runStart(mod)
	}
	if mod != nil {
		_ = mod.Close(context.Background())
	}
	stdout.flush()
	stderr.flush()
	inst.err = exitError(err)
	// done is closed before the batch in progress is answered, so that a
	// Transform that gets the answer also sees the instance dead.
	close(inst.done)
	if inst.cur != nil {
		e := &Error{Kind: KindTrap, Msg: inst.exitReason()}
		if p.isClosed() {
			e = errClosed
		}
		inst.answer(nil, e)
	}
}

// runStart runs _start of an instrumented module (deadline.go), setting its
// stop global when the instance's context is cancelled.
func (inst *instance) runStart(mod api.Module) error {
	g, ok := mod.ExportedGlobal(deadlineExport).(api.MutableGlobal)
	start := mod.ExportedFunction("_start")
	if !ok || start == nil {
		return errors.New("instrumented module lacks its stop global or _start")
	}
	var (
		mu       sync.Mutex
		finished bool
	)
	stop := context.AfterFunc(inst.ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			// Read by the guest's compiled code at its next loop iteration.
			g.Set(1)
		}
	})
	_, err := start.Call(inst.ctx)
	stop()
	mu.Lock()
	finished = true
	mu.Unlock()
	var exit *sys.ExitError
	if err != nil && inst.ctx.Err() != nil && !errors.As(err, &exit) {
		return errStopped // trapped at the stop check (or on the way out)
	}
	if err != nil && !errors.As(err, &exit) {
		err = fmt.Errorf("module[] function[_start] failed: %w", err)
	}
	return err
}

func exitError(err error) error {
	var exit *sys.ExitError
	switch {
	case err == nil:
		return errors.New("guest returned from _start")
	case errors.As(err, &exit):
		switch exit.ExitCode() {
		case sys.ExitCodeContextCanceled, sys.ExitCodeDeadlineExceeded:
			return errors.New("instance stopped")
		}
		return fmt.Errorf("guest exited with code %d", exit.ExitCode())
	case errors.Is(err, errStopped):
		return errors.New("instance stopped")
	}
	return err
}

// errStopped is the panic a host function raises to end a cancelled instance.
var errStopped = errors.New("instance stopped")

// trapf returns the panic value a host function raises to trap the guest.
func trapf(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// answer completes the current batch.
func (inst *instance) answer(out []Output, err error) {
	inst.cur.resp <- result{out: out, err: err}
	inst.cur = nil
	inst.delivered = false
}

// complete answers the current batch with what the guest produced.
func (inst *instance) complete() {
	out, err := inst.out.finish()
	inst.answer(out, err)
}

// wait blocks until the next batch, or ends the guest if the instance is cancelled.
func (inst *instance) wait() {
	if !inst.waited {
		inst.waited = true
		close(inst.ready)
	}
	select {
	case req := <-inst.reqs:
		inst.cur = req
		inst.delivered = false
		inst.out.reset(req.keep)
	case <-inst.ctx.Done():
		panic(errStopped)
	}
}

func instanceOf(ctx context.Context) *instance {
	inst, _ := ctx.Value(instanceKey{}).(*instance)
	if inst == nil {
		// A host function called outside a pool (cannot happen: modules are
		// only instantiated by pools).
		panic(errStopped)
	}
	return inst
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
