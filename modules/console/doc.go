// Package console is the web console (console.web): a page served by the admin
// listener from files embedded in the binary, and the JSON endpoints it reads. It
// shows the cluster as any Kafka client sees it (brokers, controller, topics with
// their partitions, leaders, ISRs, sizes and configs, a topic's records, consumer
// groups with members, assignor and lag per partition in records and in seconds,
// with a chart of the group's recent lag), and the broker's transforms and assignor
// plugins (the /v1/transforms and /v1/plugins endpoints of their modules).
//
// # Endpoints (GET; docs/admin-api.md)
//
//	/                                  the page (ui/index.html)
//	/console/{file}                    its script and style sheet
//	/v1/console/cluster                brokers, controller, cluster id, health counts
//	/v1/console/topics                 every topic: partitions, replication factor,
//	                                   under-replicated and offline partitions, records,
//	                                   bytes
//	/v1/console/topics/{topic}         partitions (leader, replicas, ISR, offsets,
//	                                   size) and configs
//	/v1/console/topics/{topic}/records a page of records: partition, and offset or
//	                                   timestamp (ms), limit (<= 100), max_bytes
//	                                   (<= 1 MiB)
//	/v1/console/groups                 every group: state, type, members, lag
//	/v1/console/groups/{group}         members, assignor, lag per partition (records
//	                                   and seconds), and the lag samples for the chart
//
// # How it reads the cluster
//
// Through a franz-go client (kadm) connected to this broker's inter-broker listener
// with the broker's own credentials (package interbroker): so any broker's console
// shows the whole cluster, whichever broker leads a partition or coordinates a group.
// The admin listener's gate has already checked that the person asking may describe
// the cluster (every GET needs Describe on the cluster); reading records needs Read
// on the topic besides, checked here against the broker's authorizer with the admin
// principal. A group's lag in seconds needs the partition's batch timestamps, read
// from this broker's replicas (kernel.ReplicaOffsets): partitions it holds no replica
// of show no time lag.
//
// # Lag samples
//
// A group's total lag and largest time lag are sampled when its page is read, and
// every lag_sample_ms while it was read in the last 10 minutes (at most 50 groups),
// keeping lag_samples per group: the chart costs nothing for groups nobody watches.
//
// # Invariants
//
//   - Every answer is bounded: a records page by limit and max_bytes (each key and
//     value cut at 16 KiB, marked truncated), lists by the cluster's size.
//   - A malformed or oversized request is answered 400 with {"error": ...}, before
//     anything is read.
//   - No request of the page writes anything.
//
// # Concurrency
//
// Handlers run concurrently; the client is made once (sync.Once-like under mu) and
// closed at Stop; the sampler goroutine is owned by the module and stopped at Stop.
package console
