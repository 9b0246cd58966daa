package metadata

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// fakeContext is a kernel.Context for tests: it records claimed handlers.
type fakeContext struct {
	info     kernel.BrokerInfo
	log      *slog.Logger
	handlers map[int16]kernel.Handler
	versions map[int16][2]int16
	metrics  *kernel.Metrics
}

func newFakeContext(t testing.TB, node int32, dir string) *fakeContext {
	return &fakeContext{
		info: kernel.BrokerInfo{
			NodeID:    node,
			DataDir:   dir,
			Listeners: []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		},
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		handlers: map[int16]kernel.Handler{},
		versions: map[int16][2]int16{},
		metrics:  kernel.NewMetrics(),
	}
}

func (c *fakeContext) Logger() *slog.Logger                 { return c.log }
func (c *fakeContext) Broker() kernel.BrokerInfo            { return c.info }
func (c *fakeContext) Lookup(string) (kernel.Module, error) { return nil, nil }
func (c *fakeContext) HandleHTTP(string, http.Handler)      {}
func (c *fakeContext) Metrics() *kernel.Metrics             { return c.metrics }
func (c *fakeContext) Handle(key, minV, maxV int16, h kernel.Handler) error {
	c.handlers[key] = h
	c.versions[key] = [2]int16{minV, maxV}
	return nil
}

// denyAuthorizer denies the listed operations on topics whose name is in topics (any
// topic when topics is nil), and on the cluster when cluster is set.
type denyAuthorizer struct {
	ops     map[kernel.Operation]bool
	topics  map[string]bool
	cluster bool
}

func (d denyAuthorizer) Authorize(_ context.Context, _ kernel.Principal, _ string, op kernel.Operation, r kernel.Resource) bool {
	if !d.ops[op] {
		return true
	}
	switch r.Type {
	case kernel.ResCluster:
		return !d.cluster
	case kernel.ResTopic:
		return d.topics != nil && !d.topics[r.Name]
	}
	return true
}

// startModule provisions and starts a module on dir; it is stopped when the test ends.
func startModule(t testing.TB, dir string, configure ...func(*Module, *fakeContext)) (*Module, *fakeContext) {
	t.Helper()
	fc := newFakeContext(t, 1, dir)
	m := Info().New().(*Module)
	for _, f := range configure {
		f(m, fc)
	}
	if err := m.Provision(fc); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Start(ctx); err != nil {
		_ = m.Cleanup()
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { stopModule(t, m) })
	return m, fc
}

func stopModule(t testing.TB, m *Module) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := m.Cleanup(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// call sends a request body to the handler the module claimed for its key.
func call[R kmsg.Response](t testing.TB, fc *fakeContext, authz kernel.Authorizer, body kmsg.Request) R {
	t.Helper()
	if authz == nil {
		authz = kernel.AllowAll{}
	}
	h := fc.handlers[body.Key()]
	if h == nil {
		t.Fatalf("no handler for key %d", body.Key())
	}
	req := &kernel.Request{
		Key: body.Key(), Version: body.GetVersion(), Body: body,
		Conn:       &kernel.ConnInfo{Listener: "PLAINTEXT", Principal: kernel.Anonymous},
		Authorizer: authz,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h(ctx, req)
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	r, ok := resp.Msg.(R)
	if !ok {
		t.Fatalf("response %T", resp.Msg)
	}
	return r
}

// waitFor polls fn until it is true or d passes.
func waitFor(t testing.TB, d time.Duration, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v", d)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
