// Package rate measures per-client rates in sampled windows and computes throttle times
// the way Kafka's client quota managers do (quota.window.num samples of
// quota.window.size.seconds each), so a Kafka-compatible broker can hold clients to
// byte-rate, request-time and controller-mutation quotas. It is pure logic: every
// method takes the time (now), nothing starts a goroutine, and there is no package
// state.
//
//   - Sensor: one rate, for one client (not safe for concurrent use).
//   - Sensors[K]: sensors by key (user, client id, or both), safe for concurrent use,
//     bounded in size.
//   - TokenBucket: KIP-599's controller mutation quota.
//
// Usage, in a broker's request path:
//
//	produce := rate.NewSensors[string](rate.Config{}, 0) // 11 samples of 1 s, 100,000 clients
//	// Produce: record the bytes, then answer (and mute) with the throttle time.
//	d := produce.RecordAndThrottle(clientID, float64(size), quotaBytesPerSec, now)
//	resp.ThrottleMillis = int32(d.Milliseconds())
//
//	// Fetch: a client already over quota gets an empty response with the throttle
//	// time; otherwise record what is read, and take back what is not sent.
//	if d := fetch.Throttle(clientID, quota, now); d > 0 { /* empty response, d */ }
//	d := fetch.RecordAndThrottle(clientID, float64(read), quota, now)
//	fetch.Unrecord(clientID, float64(read-sent), now)
//
//	// Housekeeping, every few seconds, and metrics:
//	produce.Sweep(now)
//	produce.Each(now, func(id string, r float64) { gauge(id, r) })
//
//	// CreateTopics v6+ (strict): refuse when the bucket is negative.
//	ok, wait := mutations.Admit(float64(partitions), mutationRate, now)
//
// # Formulas
//
// With N = Config.Samples (default 11) and W = Config.Window (default 1 s):
//
//   - Sample: a record at now goes into the newest sample if now - start < W, else
//     it opens a new sample with start = now (a sample starts at its first record, not
//     on a boundary of W). Before a record or a measurement, a sample with
//     now - start >= N*W is purged (it no longer exists).
//   - Rate: rate = (sum of the live samples) / elapsed, in units per second, with
//     elapsed = max(now - start of the oldest live sample, (N-1)*W). No live sample:
//     rate 0. The padding to (N-1)*W keeps a new sensor from reporting a huge rate
//     after its first record: one record of 1000 is a rate of 1000/10 s = 100/s.
//   - Throttle, for a limit L > 0: 0 if rate <= L, else
//     throttle = (rate - L) / L * elapsed (the same padded elapsed), capped at
//     Config.MaxThrottle (default N*W). It is the silence after which
//     sum / (elapsed + throttle) = L: the time the client must send nothing for the
//     rate, over that stretched window, to be back at the limit. (Purges during the
//     silence are not foreseen, as in Kafka.) L <= 0 or NaN: no quota, throttle 0.
//   - Record first, then check (Kafka's order): RecordAndThrottle counts the request
//     that crosses the limit and throttles for it. Throttle checks without recording;
//     Unrecord subtracts from the newest sample, not below zero.
//   - Burst (Config.Burst = B > 0, Sluice's own): the throttle comes from a leaky
//     bucket instead of the sampled rate. Each call that gives a limit L first drains
//     the bucket by the previous call's limit times the time since, not below 0, and
//     from then on drains at L; a record adds its value (only once a limit is known);
//     Unrecord takes back, not below 0; no limit empties it. Throttle: 0 if
//     level <= L*B, else (level - L*B) / L, capped at MaxThrottle. A greedy client so
//     gets L over any span plus at most B's worth (and one request) at once, where the
//     sampled throttle lets it send (N-1)*W's worth in a burst each time one ages out.
//     The rate is still the sampled one. A sensor with a non-empty bucket is not idle.
//   - TokenBucket, for a rate R > 0: burst B = R * N * W (in seconds); at each call
//     tokens = min(tokens + R * (now - last), B) (full at the first call). Admit:
//     refused if tokens < 0, with wait = -tokens / R; else tokens -= cost (whole, even
//     below zero). Record: tokens -= cost unchecked, wait = max(0, -tokens / R). The
//     wait is not capped. A deficit that would be repaid within half a nanosecond counts
//     as zero, so a client that waits exactly the wait it was given is admitted.
//
// Durations are rounded to the nanosecond (the throttle to the nearest, the bucket's
// wait up); a broker rounds them to milliseconds for the wire.
//
// # Invariants
//
//   - A sensor has at most N live samples and they are ordered by start, at least W
//     apart, all younger than N*W. So the ring never overwrites a live sample: by the
//     time a new sample is needed, the oldest of N live ones has aged out.
//   - Samples never go negative: Record ignores values that are negative, NaN or
//     infinite, and Unrecord floors at zero. So a rate is finite and >= 0.
//   - Time never goes back within a sensor or a bucket: a now earlier than one already
//     seen counts as the latest seen (so with several callers, a time read just before
//     another caller's lands in the newest sample). Times are kept as nanoseconds since
//     the first time a sensor saw, taken with time.Time.Sub, so monotonic clock
//     readings are used when present.
//   - Sensors holds at most Max sensors (default 100,000). An insert into a full map
//     drops every idle sensor and, if that frees fewer than Max/64 (rounded up), the
//     least recently used (by the latest now of a RecordAndThrottle, Throttle or
//     Unrecord on the key) to make up that many. Dropping a sensor only forgets history, and a
//     sensor that remembers less measures a lower rate: a drop can let a client through
//     that would have been throttled, never throttle one wrongly.
//   - A sensor is idle when it has no live sample (and, with a burst, an empty
//     bucket): its rate is 0, and dropping it changes no answer. It turns idle N*W
//     after its newest sample started, or when its bucket empties if that is later.
//
// # Concurrency
//
// Sensor and TokenBucket are not safe for concurrent use; their owner guards them.
// Sensors is safe for concurrent use. Lock order: Sensors.mu (a sync.RWMutex over the
// map), then a sensor's own mutex; nothing takes Sensors.mu while holding a sensor's.
// A call on a key takes the map's read lock only for the lookup and then the sensor's
// lock, so calls on different keys run in parallel and a hot key holds up no other.
// The write lock is taken to add a sensor (and make room) and by Sweep to drop the
// sensors it found idle under the read lock. A dropped sensor is marked dead under its
// lock; a caller that looked it up before the drop sees the mark and looks the key up
// again, so no record lands in a sensor that has left the map. Each copies the keys
// under the read lock and calls fn with no lock held, so fn may call the map.
package rate
