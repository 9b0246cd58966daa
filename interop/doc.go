// Package interop drives a real Sluice broker process with real Kafka clients: kcat and
// librdkafka (through Debian's python3-confluent-kafka), kafkajs under node, and franz-go.
// It also kills the broker with SIGKILL mid-produce and checks that every acknowledged
// record survives the restart.
//
// The consumer group tests (groups_test.go holds their helpers) run kafkajs
// (kafkajs_group_test.js), librdkafka (librdkafka_group_test.py) and `kcat -G` group
// consumers: partitions shared between members, every record consumed, commits reaching
// the end offsets, a restarted consumer resuming from them, a SIGKILLed member expiring
// after its session timeout, a live group across a broker SIGKILL, and kadm's
// ListGroups/DescribeGroups/Lag views of live and empty groups. TestCrashGroupCommits
// SIGKILLs the broker while offset commits are in flight and checks that every
// acknowledged commit survives.
//
// The WASM transform tests (transforms_test.go, with transforms_test.js as the kafkajs
// producer) build the example transforms in examples/transforms/ for wasip1 once, deploy,
// list and delete them with the `sluice transform` CLI of the built binary against the
// broker's admin listener, and check with kafkajs and kcat what inline (redact-json,
// redpanda-uppercase) and derived (route-by-key) transforms store, across a broker
// SIGKILL, and that bad deploys fail with a non-zero exit and a clear message.
// TestTransformDerivedExactlyOnce (transforms_eos_test.go) deploys route-by-key in
// derived mode, SIGKILLs the broker three times while it works and checks with a
// read_committed consumer that every input record's output is there exactly once.
//
// The idempotence and transaction tests (idempotence_test.go, txn_*_test.go, helpers in
// txn_helpers_test.go) resend hand-built producer batches with raw Produce requests
// (duplicates answered with their original offsets, before and after a broker SIGKILL;
// sequence gaps refused), keep one idempotent franz-go producer running across broker
// SIGKILLs (every record exactly once, in order), run a GroupTransactSession
// consume-transform-produce pipeline as a separate process (interop/internal/eospipe,
// built once) with the pipeline or the broker SIGKILLed mid-stream, do the same with a
// kafkajs pipeline made of the seed's transaction snippet (txn_kafkajs_eos_test.js), and
// check read_committed against read_uncommitted for franz-go, librdkafka
// (txn_librdkafka_test.py; txn_librdkafka_kill_test.py keeps transactional and
// idempotent librdkafka producers running across broker SIGKILLs) and kafkajs (txn_kafkajs_test.js: the seed's idempotent and
// transactional producer snippets, tx.sendOffsets checked with kadm), zombie fencing on a
// second InitProducerId, the coordinator aborting a transaction past its timeout,
// transaction state across broker SIGKILLs at each step of the two-phase commit, 8
// concurrent transactional producers on shared partitions, and kadm's
// DescribeTransactions, ListTransactions and DescribeProducers views. Consumers read up to a plain
// sentinel record appended to each partition afterwards, so a transaction left open
// (the last stable offset stuck below the sentinel) fails the read instead of passing it.
//
// The cluster tests (cluster_*_test.go, helpers in cluster_helpers_test.go) start three
// or four broker processes that form one cluster (a three-voter raft metadata quorum,
// each broker with its own client, raft and admin ports): partition leaders spread over
// the brokers, produce and consume through each, a Fetch sent to a broker that does not
// lead the partition answered NOT_LEADER_OR_FOLLOWER with the leader (KIP-951), topic
// creation forwarded from a broker that is not the controller, a SIGKILLed controller
// replaced within seconds and the killed broker fenced, then rejoining, a SIGTERMed
// broker fenced (RF=1 partitions offline, RF=3 ones re-led) and unfenced on return, a
// whole-cluster restart keeping topics and configs, a fourth non-voting broker taking
// new partitions, DescribeQuorum, and a network partition made with in-process TCP
// proxies on every raft link (the controller or a follower cut off, the majority going
// on, the cut broker fenced, then catching up after healing). TestClusterRun3Script drives
// examples/cluster/run-3.sh.
//
// The replication tests (replication_*_test.go, helpers in replication_helpers_test.go)
// check ISR replication with RF 3 topics and SIGKILL: TestReplicationDurability runs an
// idempotent acks=all kgo producer and a reader while a nemesis kills and restarts random
// brokers (15s; SLUICE_DURABILITY=10m for a long run), then checks that every record is
// stored once and in order, that nothing the reader saw disappeared, and that the three
// replicas' segment files hold the same batches; TestReplicationClientsBrokerKills does
// the same with librdkafka (replication_librdkafka_test.py) and kafkajs
// (replication_kafkajs_test.js) idempotent acks=all producers (two kills each; six with
// SLUICE_DURABILITY set), checking every delivery report; TestReplicationLeaderLossAcks kills a leader under acks=1 and acks=all
// producers (acks=1 may lose, acks=all must not); TestReplicationUncleanElection keeps
// a partition whose ISR died offline until unclean.leader.election.enable is set, then
// checks the documented loss and the old leader's truncation;
// TestReplicationPartitionedLeader cuts a leader off (raft and follower-fetch links
// through TCP proxies): it cannot acknowledge acks=all, and after healing it truncates
// what it appended alone. Benchmarks (cluster_bench_test.go): topic creation, metadata
// propagation, RF 3 acks=all against RF 1 acks=1.
//
// The client quota tests (quotas_test.go) measure rates on the broker (partition sizes
// from DescribeLogDirs over 10 s, after a warm-up) with a two-sample rate window:
// TestQuotaClients runs a librdkafka producer (quotas_librdkafka_test.py), a kafkajs
// producer (quotas_kafkajs_test.js), a kgo producer and a kgo consumer, each with a
// client-id quota, beside a kgo producer without one, and holds each within 10% of its
// quota while the free one makes many times more; TestQuotaCluster sets a producer
// quota Q through a broker that is not the controller, sees every broker describe it,
// and checks that each of three brokers holds a producer writing to a partition it
// leads to Q, so the client makes 3Q in all.
//
// Other clients' own suites run against Sluice from the module cache:
// TestSaramaSuite runs sarama's functional tests (build tag functional) on five broker
// processes (three raft voters, racks 1-5) set up as sarama's docker-compose sets up
// Kafka, each reached through a toxiproxy proxy it advertises on 127.0.0.1:2909N;
// a "docker" script first on the suite's PATH carries out the tests' docker compose
// stop, start and logs on the brokers. TestKafkaGoSuite runs every package of kafka-go
// against one broker set up as kafka-go's docker-compose sets up Kafka (PLAINTEXT on
// localhost:9092, SASL_PLAINTEXT on :9093 with its PLAIN and SCRAM users). Each lists
// the tests expected to fail with why; any other failure fails the test. CI runs a
// short form of each (SLUICE_CLIENT_SUITES=full runs them whole). TestFranzGroupSuite
// and the SCRAM test run franz-go's own kgo tests the same way.
//
// The package holds only tests. TestMain builds ./cmd/sluice once into a temporary
// directory; each test starts its own broker on free 127.0.0.1 ports with a temporary data
// directory, waits for GET /readyz on the admin listener, and stops it with SIGTERM in
// t.Cleanup (a broker that does not exit cleanly, panics or reports a data race fails the
// test; its stderr goes to the test log when a test fails).
//
// Usage:
//
//	go test ./interop/                      # skips clients that are not installed
//	SLUICE_INTEROP_REQUIRED=1 go test ./interop/   # a missing client is a failure (CI)
//	SLUICE_INTEROP_BUILDFLAGS=-race go test ./interop/   # race-detector broker
//	SLUICE_INTEROP_LOG=1 go test -v ./interop/   # broker stderr even when tests pass
//	SLUICE_INTEROP_CRASH_CONFIG="$(cat cfg.yaml)" go test -run Crash ./interop/
//	                                        # crash test on another config; with
//	                                        # storage {use: memory} it must fail
//
// The tests skip under -short. scripts/test.sh installs kcat, python3-confluent-kafka and
// the pinned kafkajs (npm ci in this directory) and runs this package with
// SLUICE_INTEROP_REQUIRED=1.
//
// # Invariants
//
//   - Only TestReadmeCommands and TestKafkaGoSuite use the default ports
//     127.0.0.1:9092 (and :9644, :9093); TestReadmeCommands does not run in parallel
//     with anything, and both fail or skip (rather than talk to a stranger) when
//     something else already listens there. TestSaramaSuite alone uses
//     127.0.0.1:29091-29095, as sarama's tests require.
//   - Every process a test starts is killed and waited for in t.Cleanup, in its own
//     process group, so a broker's children go with it.
//
// # Concurrency
//
// Every test but TestReadmeCommands (fixed default ports), TestClusterRun3Script (a
// range of consecutive ports that freePort does not know about) and the TestTransform*
// tests (compiling WASM in a -race broker is CPU-bound: three at once on two cores ran
// past the CLI's deadline) calls t.Parallel:
// most of a test's time is spent waiting on the brokers' timeouts (sessions, elections,
// transaction and fetch waits), so running a few at once (scripts/test.sh passes
// -parallel) cuts the suite's wall time without loading the CPU much more. A test must
// therefore own everything it starts: fresh ports from freePort, its own data dirs, no
// t.Setenv, no process-wide state. The two serial tests run first, alone (Go resumes
// parallel tests only after the serial ones finish). Each test names its broker's
// address in its failure output, so interleaved logs stay attributable.
package interop
