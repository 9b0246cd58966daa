// Package quotas is the client quota module (quotas.window, role "quotas"): Kafka's
// client quotas (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546, KIP-599), so that tenants
// sharing a cluster are held to their rates and one client cannot starve the others.
//
// # Pieces
//
//	quotas (this package)  the module: DescribeClientQuotas (48), AlterClientQuotas (49),
//	                       the quota records in the metadata log, the enforcer
//	                       (kernel.Quotas), metrics
//	quotas/quota           entities, values, Kafka's precedence and filters (pure)
//	internal/rate          sampled rate windows, throttle times, token buckets (pure;
//	                       replication throttles use it too)
//
// # Where quotas live
//
// Each entity with quotas is one metadata extension record (store.go: namespace
// "quotas", key the SHA-256 of the entity, value JSON), written through the metadata
// log by AlterClientQuotas on any broker (forwarded to the controller), so every broker
// applies the same quotas and they survive restarts. Each new image whose quota
// namespace changed rebuilds the quota.Set; requests read the current one lock-free.
//
// # Enforcement
//
// Quotas are per broker, as in Kafka: each broker measures the clients it serves. A
// client is a (user, client id) pair (kernel.QuotaClient; the user is the principal's
// name, ANONYMOUS without authentication). For each quota type the applicable entity is
// resolved by Kafka's precedence (quota.Set.Resolve), and clients the entity covers
// together share one rate (quota.Group): a quota on user=alice binds all of alice's
// clients together, one on client-id=<default> each client id alone.
//
//	producer_byte_rate        Produce record bytes (replication charges them)
//	consumer_byte_rate        Fetch bytes returned; a client already over its quota gets
//	                          an empty answer (replication asks before reading)
//	request_percentage        handling time of every request but ApiVersions, SASL and
//	                          follower fetches, waits excluded (the kernel charges it):
//	                          100 is one thread's worth of time
//	controller_mutation_rate  partitions created or deleted by CreateTopics,
//	                          CreatePartitions and DeleteTopics (the metadata module
//	                          charges them; KIP-599 token bucket, strict for the
//	                          versions that know THROTTLING_QUOTA_EXCEEDED)
//	connection_creation_rate  new connections per second from one address (ip
//	                          entities, KIP-612; the kernel asks at accept): one over
//	                          it is held unread for its throttle time, then closed
//
// Rates are measured over quota.window.num samples of quota.window.size.seconds
// (Kafka's defaults 11 and 1 s; rate.Sensor), for /metrics and for Kafka's throttle.
// The byte-rate and request quotas throttle by a leaky bucket that drains at the
// quota (sluice.quota.burst.ms, default 1 s): a client over it gets, in
// throttle_time_ms, the time the bucket needs to drain back to one burst's worth, so it
// keeps to its quota over any span and never gets more than a burst ahead. Kafka's
// throttle, kept with sluice.quota.burst.ms 0 and for connection_creation_rate, is
// the silence that brings the sampled rate back to the quota ((rate - quota) / quota ×
// window, capped at the whole window); it lets a backlogged client send nine or ten
// windows' worth at once each time an earlier burst ages out of the window, and that
// burst is what its neighbours on the broker feel. The kernel answers at
// once and then takes no request from the connection for that long (KIP-219), so a
// client that ignores the hint is held back anyway; clients that throttle themselves
// (kgo, librdkafka, kafkajs, the Java client) simply wait.
//
// # Bounds
//
// One sensor per quota type and client group with a quota, at most max_sensors
// (default 100,000) per type: idle sensors go first, then the least recently used
// (forgetting a rate can only let a client through early, never block it wrongly).
// Without any quota configured nothing is measured: every charge returns at once.
//
// # Invariants
//
//   - Every broker applies the quota records of the metadata log in log order; a
//     rebuilt Set is only ever replaced by one from a newer image.
//   - A throttle time is never negative and never longer than the rate window.
//   - Charging never blocks a request beyond the sensor's lock.
package quotas
