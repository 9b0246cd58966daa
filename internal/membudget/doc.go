// Package membudget holds the tests of the broker's memory budgets against real broker
// processes (internal/brokerproc), with their resident set asserted: a flood of
// partial requests (queued.max.request.bytes), concurrent decompression bombs
// (queued.max.decompressed.bytes) and concurrent admin uploads
// (admin_max_concurrent_uploads, admin_max_body_bytes). Each runs in a short form by
// default and at the sizes the issue measured with SLUICE_SCALE=full; each also runs
// the flood against a broker with the budget lifted and logs both peaks, the "before"
// and "after" of docs/BENCHMARKS.md.
//
// There is no code here, only tests.
package membudget
