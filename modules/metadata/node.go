package metadata

import (
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// node is this broker's raft node and what the module's parts share: the hub of
// published images, the raft handle, the controller RPC client, proposing records
// (locally on the leader, forwarded elsewhere: controller.go, forward.go) and the
// goroutines Stop waits for. Module holds it (Module.node); the controller and the
// lifecycle embed a pointer to it.
//
// Lock order: node.mu guards only stopped and wg.Add; it is never held while taking
// another lock (see DESIGN.md).
type node struct {
	kctx   kernel.Context
	log    *slog.Logger
	nodeID int32
	voters []voter
	rand   io.Reader // ids and placement; crypto/rand unless a test sets it
	// features are this broker's supported feature levels, by name (features.go); set
	// before Start, read only after.
	features []kernel.SupportedFeature

	hub  *hub
	raft atomic.Pointer[raft.Raft]
	// commitTime observes a proposal's commit latency (metrics.go); nil without
	// metrics.
	commitTime prometheus.Observer
	trans      raft.Transport
	mux        *rpc.Mux    // raft port (raft + controller RPC); nil with the in-memory transport
	rpc        *rpc.Client // calls to the controller

	// changes coalesces concurrent AlterPartition proposals (changebatch.go).
	changes changeBatcher

	// wakeController asks the controller (when this node is it) to look at the image
	// now rather than at its next tick.
	wakeController func()

	mu      sync.Mutex // guards stopped and wg.Add
	stopped bool
	wg      sync.WaitGroup // leader loop and future waiters
	// stopping mirrors stopped without the lock, for raft's log lines (hclog.go),
	// which may come from goroutines a lock holder waits for.
	stopping atomic.Bool
}
