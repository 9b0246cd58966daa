package kernel

import (
	"context"
	"net/netip"
	"sync/atomic"
	"time"
)

// Seams of client quotas (the "quotas" role, optional; modules/quotas). The quota
// module keeps the configured quotas and the clients' rates; the modules that do the
// work charge it:
//
//   - the kernel charges every request's handling time (request_percentage) after the
//     handler returns (Quotas.RequestThrottle), time the handler spent waiting
//     (NoteWait) excluded;
//   - the replication module charges the bytes a Produce appended and a Fetch returned
//     (producer_byte_rate, consumer_byte_rate), and answers a Fetch of a client already
//     over its quota with no records;
//   - the metadata module admits topic and partition mutations (controller_mutation_rate);
//   - the kernel admits each new connection by its address (connection_creation_rate):
//     one over its rate is held unread for the throttle time and then closed.
//
// Whoever charged puts the throttle time in the response it builds (throttle_time_ms);
// the kernel takes the largest of that and the request-time throttle, sets it in the
// response, and then holds the connection: it answers at once and reads nothing more
// from it until the throttle time has passed (KIP-219), so a client that ignores the
// hint is held back all the same. For response versions older than KIP-219 (whose
// clients wait before sending the request after the response) the kernel delays the
// response instead, as Kafka does.

// QuotaClient names the client a quota is charged to: its principal's user name
// (KIP-546; Kafka's "ANONYMOUS" for unauthenticated connections) and its client id.
type QuotaClient struct {
	User     string
	ClientID string
}

// QuotaClientOf returns the QuotaClient of a request: a connection without a
// principal counts as Anonymous's user, ANONYMOUS.
func QuotaClientOf(req *Request) QuotaClient {
	user := req.Conn.Principal.Name
	if user == "" {
		user = Anonymous.Name
	}
	return QuotaClient{User: user, ClientID: req.ClientID}
}

// Quotas is implemented by the quota module (role "quotas").
type Quotas interface {
	// RequestThrottle charges handling, the time the broker worked on one request of c
	// (API key key), to c's request quota and returns how long c must be throttled.
	RequestThrottle(c QuotaClient, key int16, handling time.Duration, now time.Time) time.Duration
	// ProduceThrottle charges bytes appended for c and returns its throttle time.
	ProduceThrottle(c QuotaClient, bytes int64, now time.Time) time.Duration
	// FetchThrottle returns how long c is throttled now, before a Fetch reads anything:
	// a client over its quota gets an empty response with this throttle time.
	FetchThrottle(c QuotaClient, now time.Time) time.Duration
	// FetchRecord charges bytes a Fetch returned to c and returns its throttle time.
	FetchRecord(c QuotaClient, bytes int64, now time.Time) time.Duration
	// AdmitMutation charges a topic or partition mutation of cost partitions to c
	// (KIP-599). ok false: refused (strict callers answer THROTTLING_QUOTA_EXCEEDED);
	// throttle is the time to put in the response either way.
	AdmitMutation(c QuotaClient, cost int, strict bool, now time.Time) (ok bool, throttle time.Duration)
	// AdmitConnection charges a new connection from ip to its connection_creation_rate
	// quota (KIP-612) and returns how long it is over: the kernel then holds the
	// connection unread that long and closes it, as Kafka does.
	AdmitConnection(ip netip.Addr, now time.Time) (throttle time.Duration)
}

// waitKey is the context key of a request's wait accumulator.
type waitKey struct{}

// withWaitNote returns ctx carrying an accumulator for NoteWait.
func withWaitNote(ctx context.Context, acc *atomic.Int64) context.Context {
	return context.WithValue(ctx, waitKey{}, acc)
}

// NoteWait records that the request of ctx spent d waiting for something other than
// the broker's own work (replication acks, a fetch's long poll, a lock held by another
// request): that time is not charged to the client's request quota.
func NoteWait(ctx context.Context, d time.Duration) {
	if acc, ok := ctx.Value(waitKey{}).(*atomic.Int64); ok && d > 0 {
		acc.Add(int64(d))
	}
}

// QuotasHook is implemented by a module the quota module needs itself (the metadata
// module: the quotas are stored in its log), so that module cannot look the quota
// module up without a cycle: the quota module registers itself at Provision.
type QuotasHook interface {
	// SetQuotas registers q; it applies to requests from then on.
	SetQuotas(q Quotas)
}
