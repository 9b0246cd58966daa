package kernel

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Module is any value a ModuleInfo.New returns. What a module can do is found by type
// assertion against the lifecycle interfaces below and against the role interfaces in
// seams.go (Storage, Metadata, Authorizer, ...).
type Module any

// ModuleInfo names a module implementation and says how to make one.
//
// ID is "<role>.<name>", e.g. "storage.segmentlog": the role is the config key under
// `modules:` and the name is what `use:` selects. A guest's ID has more dots,
// "<namespace>.<name>" with a dotted namespace a host module chose, e.g.
// "groups.assignor.range": it is no role module, and its host makes it with
// Registry.NewGuest (guest.go).
type ModuleInfo struct {
	ID  string
	New func() Module // no side effects: the config section is decoded into the result
}

// Role returns the part of the ID before the first dot.
func (mi ModuleInfo) Role() string { r, _, _ := strings.Cut(mi.ID, "."); return r }

// Name returns the part of the ID after the first dot.
func (mi ModuleInfo) Name() string { _, n, _ := strings.Cut(mi.ID, "."); return n }

// Lifecycle. New → strict decode of the config section → Check → Provision → Validate →
// Start → Stop → Cleanup. Cleanup must also work after a failed Provision.
type (
	// Checker checks a decoded module's settings before anything is provisioned,
	// bound or written, so a broker with a bad config refuses to start having touched
	// nothing, and says everything wrong at once (kernel.New collects every module's
	// Check).
	Checker interface{ Check(CheckContext) error }
	// Provisioner sets a module up: it looks up the modules it depends on and claims
	// API keys. It must not start goroutines.
	Provisioner interface{ Provision(Context) error }
	// Validator checks a provisioned module's settings.
	Validator interface{ Validate() error }
	// Starter starts a module's background work; it returns once the module serves.
	Starter interface{ Start(context.Context) error }
	// Stopper stops background work and waits for it; ctx bounds the wait.
	Stopper interface{ Stop(context.Context) error }
	// CleanerUpper releases what Provision acquired (files, stores).
	CleanerUpper interface{ Cleanup() error }
	// Readier reports whether a started module serves yet (the metadata module: a
	// leader is known and this broker is registered). /readyz and Kernel.Ready are
	// true only when every Readier is.
	Readier interface{ Ready() bool }
)

// Registry maps module IDs to their infos. main fills one with modules/standard.Register;
// there is no global registry, so two brokers with different module sets can share a
// process.
type Registry struct {
	mods map[string]ModuleInfo
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{mods: map[string]ModuleInfo{}} }

// Register adds a module or a guest. It panics on a duplicate or malformed ID (an empty
// dotted segment): that is a programmer error found at startup.
func (r *Registry) Register(mi ModuleInfo) {
	if mi.Role() == "" || mi.Name() == "" || mi.New == nil || slices.Contains(strings.Split(mi.ID, "."), "") {
		panic(fmt.Sprintf("kernel: malformed module info %q", mi.ID))
	}
	if _, dup := r.mods[mi.ID]; dup {
		panic(fmt.Sprintf("kernel: module %q registered twice", mi.ID))
	}
	r.mods[mi.ID] = mi
}

// Lookup returns the module registered under id.
func (r *Registry) Lookup(id string) (ModuleInfo, bool) { mi, ok := r.mods[id]; return mi, ok }

// Names returns the registered names for a role, sorted (guests are not listed: see
// Guests).
func (r *Registry) Names(role string) []string { return r.Guests(role) }

// Guests returns the names registered directly under namespace, sorted: for
// "groups.assignor" the "range" of "groups.assignor.range", not deeper IDs. A role is a
// one-word namespace, so Guests("storage") lists the storage modules.
func (r *Registry) Guests(namespace string) []string {
	var out []string
	for id := range r.mods {
		if name, ok := strings.CutPrefix(id, namespace+"."); ok && !strings.Contains(name, ".") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Namespaces returns the guest namespaces under role, sorted: "groups.assignor" for a
// registered "groups.assignor.range" (IDs of three or more segments).
func (r *Registry) Namespaces(role string) []string {
	var out []string
	for id := range r.mods {
		parts := strings.Split(id, ".")
		if len(parts) < 3 || parts[0] != role {
			continue
		}
		ns := strings.Join(parts[:len(parts)-1], ".")
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return out
}

// Roles returns the roles that have a registered module, sorted.
func (r *Registry) Roles() []string {
	var out []string
	for id := range r.mods {
		role, _, _ := strings.Cut(id, ".")
		if !slices.Contains(out, role) {
			out = append(out, role)
		}
	}
	sort.Strings(out)
	return out
}

// lookupIn returns the module registered as name directly under namespace.
func (r *Registry) lookupIn(namespace, name string) (ModuleInfo, bool) {
	if strings.Contains(name, ".") {
		return ModuleInfo{}, false
	}
	return r.Lookup(namespace + "." + name)
}

// Context is what a module sees of the kernel while it is provisioned.
type Context interface {
	// Logger is tagged module=<id>.
	Logger() *slog.Logger
	// Broker describes this broker (node id, data dir, listeners).
	Broker() BrokerInfo
	// Lookup returns the provisioned module for a role, provisioning it first if
	// needed. A cycle is an error.
	Lookup(role string) (Module, error)
	// Handle claims an API key for versions [minV, maxV]. A second claim for a key is
	// an error. ApiVersions advertises exactly what is claimed.
	Handle(key, minV, maxV int16, h Handler) error
	// HandleHTTP adds a handler to the admin HTTP listener.
	HandleHTTP(pattern string, h http.Handler)
	// Metrics is the broker's metrics registry, exported at /metrics.
	Metrics() *Metrics
}

// CheckContext is what a Checker may consult: nothing is provisioned yet.
type CheckContext struct {
	// Registry is the registry the broker is composed from, for a host's guests.
	Registry *Registry
	// NodeID is this broker's node id from the config file.
	NodeID int32
}

// BrokerInfo is the static identity of this broker.
type BrokerInfo struct {
	NodeID    int32
	ClusterID string
	DataDir   string
	Rack      string
	// Listeners are the client listeners with their bound addresses (after :0 resolves).
	Listeners []ListenerInfo
	// StaticConfigs are the broker configs from the config file's `configs:` section,
	// by Kafka name (e.g. "auto.create.topics.enable": "true"). Read-only.
	StaticConfigs map[string]string
	// Disk is the data dir's free-space guard (datadir.go); nil in modules built by
	// hand (BrokerInfo.AdmitWrite and DiskCritical then allow everything).
	Disk DiskSpace
}

// ListenerInfo is one client listener.
type ListenerInfo struct {
	Name string
	Host string
	Port int32
	// Protocol is the listener's security protocol (listener.security.protocol.map) in
	// this broker's BrokerInfo; empty in the metadata image, which does not carry it
	// (every broker resolves a listener name the same way from its own configs).
	Protocol string
}

// LookupAs looks up the module of role and asserts that it implements T (a role or
// optional interface such as Metadata, Partitions or TopicCreator), with one error
// wording for every module.
func LookupAs[T any](ctx Context, role string) (T, error) {
	var zero T
	m, err := ctx.Lookup(role)
	if err != nil {
		return zero, fmt.Errorf("look up %s: %w", role, err)
	}
	t, ok := m.(T)
	if !ok {
		return zero, fmt.Errorf("%s module %T does not implement %T", role, m, (*T)(nil))
	}
	return t, nil
}

// WaitGroup waits for wg, or for ctx to end first (then it returns ctx.Err(); the
// goroutines go on and wg's waiter with them). Modules' Stop methods use it to bound
// the wait for their goroutines.
func WaitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
