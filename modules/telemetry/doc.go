// Package telemetry is the client telemetry module (telemetry.otlp, role "telemetry"):
// KIP-714, with which clients (librdkafka 2.5+, the Java client, franz-go) push their
// own metrics to the broker, so an operator sees which clients lag, rebalance, retry
// or wait on their queues without instrumenting the applications.
//
// # Flow
//
// An operator sets CLIENT_METRICS config resources (subscriptions; the metadata module
// stores them, internal/clientmetrics reads them): which metric name prefixes, how
// often, from which clients. A client asks GetTelemetrySubscriptions (71), gets a
// client instance id (when it has none), the metrics the subscriptions matching it ask
// for, the shortest of their intervals and a subscription id, then pushes with
// PushTelemetry (72): OTLP MetricsData (protobuf), compressed as it chose among the
// accepted types. The broker decodes the push and keeps each data point's latest value
// for /metrics:
//
//	sluice_client_metric{client_id, client_instance_id, client_software, metric, attributes}
//
// Sums are asked for as cumulative (DeltaTemporality false), so a point's latest value
// is its total, as Prometheus wants it. attributes are the data point's OTLP
// attributes, sorted, "k=v" joined by commas.
//
// # Answers (Kafka's)
//
//   - GetTelemetrySubscriptions: a zero instance id gets a new random one; asked again
//     before the push interval passed: THROTTLING_QUOTA_EXCEEDED, unless the client's
//     last push was refused with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
//     The subscription id is a hash of the matching subscriptions' names and configs, so
//     it changes whenever they do. No subscription matching: no metrics requested.
//   - PushTelemetry: a zero instance id INVALID_REQUEST; an instance this broker does not
//     know, or another subscription id than the current one, UNKNOWN_SUBSCRIPTION_ID (the
//     client asks again); a push after a terminating one INVALID_REQUEST; a compression
//     type not offered UNSUPPORTED_COMPRESSION_TYPE; more than telemetry.max.bytes
//     TELEMETRY_TOO_LARGE; a payload that does not decompress or decode INVALID_RECORD.
//     A push sooner than the interval after the previous one is THROTTLING_QUOTA_EXCEEDED;
//     Sluice allows half an interval of early arrival (request latency moves pushes
//     about), where Kafka refuses any push before the full interval.
//
// # Bounds
//
// Memory is bounded by the settings: max_clients client instances (the least recently
// heard from goes first when full), max_series exported series in all (points beyond
// it are dropped and counted in sluice_client_telemetry_dropped_points_total), and
// telemetry.max.bytes per push, decompressed at most max_decompressed_bytes. A client
// instance not heard from for three push intervals, or that sent a terminating push,
// is forgotten with its series.
//
// # Concurrency
//
// One mutex guards the client table; handlers hold it only to read or update one
// instance (decoding happens outside it). Scrapes copy the series under it.
package telemetry
