//go:build linux

package membudget

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/brokerproc"
	"github.com/sluicehq/sluice/internal/recordbatch"
)

const mib = 1 << 20

// skipUnlessBefore skips the "before" measurements (a flood against a broker with the
// budget lifted, which takes as much memory as main did) unless SLUICE_SCALE=full or
// SLUICE_MEMBUDGET_BEFORE=1 asks for them.
func skipUnlessBefore(t *testing.T) {
	if !brokerproc.Full() && os.Getenv("SLUICE_MEMBUDGET_BEFORE") != "1" {
		t.Skip("measurement without the budget: SLUICE_MEMBUDGET_BEFORE=1 or SLUICE_SCALE=full")
	}
}

// floodSize is one flood's shape: conns connections, each announcing a request of
// reqBytes and sending sendBytes of it; budget is queued.max.request.bytes.
type floodSize struct{ conns, reqBytes, sendBytes, budget int }

func partialSize() floodSize {
	if brokerproc.Full() {
		// The measurement: 20 x 90 MiB, all but the last bytes sent.
		return floodSize{conns: 20, reqBytes: 90 * mib, sendBytes: 90*mib - 16, budget: 256 * mib}
	}
	return floodSize{conns: 16, reqBytes: 32 * mib, sendBytes: 30 * mib, budget: 64 * mib}
}

// flood opens the connections and sends each one's partial request, then leaves them
// stalled; it returns once every write finished or stopped (the broker stopped
// reading).
func flood(t *testing.T, p *brokerproc.Proc, s floodSize) []net.Conn {
	t.Helper()
	var conns []net.Conn
	var wg sync.WaitGroup
	body := make([]byte, s.sendBytes)
	binary.BigEndian.PutUint16(body, uint16(kmsg.Produce.Int16())) // looks like a produce
	binary.BigEndian.PutUint16(body[2:], 9)
	for range s.conns {
		nc, err := p.DialContext(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		conns = append(conns, nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sz [4]byte
			binary.BigEndian.PutUint32(sz[:], uint32(s.reqBytes))
			_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := nc.Write(sz[:]); err != nil {
				return
			}
			_, _ = nc.Write(body) // stops at the deadline once the broker stops reading
		}()
	}
	wg.Wait()
	return conns
}

// produceAndFetch produces n records through a kgo client and reads them back, within
// d; it reports what went wrong ("" when all went well).
func produceAndFetch(t *testing.T, p *brokerproc.Proc, topic string, n int, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cl := p.Client(t, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			return fmt.Sprintf("produce %d: %v", i, err)
		}
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Sprintf("fetched %d of %d records: %v", got, n, err)
		}
		fs.EachRecord(func(*kgo.Record) { got++ })
	}
	return ""
}

func createTopic(t *testing.T, p *brokerproc.Proc, name string) [16]byte {
	t.Helper()
	r, err := p.Admin(t).CreateTopic(context.Background(), 1, 1, nil, name)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// runPartialFlood starts a broker with the given configs, floods it with stalled
// partial requests, checks that a kgo client still works (when want) and returns the
// broker's baseline and peak RSS.
func runPartialFlood(t *testing.T, s floodSize, budget string, wantServed bool) (base, peak int64) {
	p := brokerproc.Start(t, brokerproc.Options{Config: fmt.Sprintf("configs: {socket.request.max.bytes: %q, queued.max.request.bytes: %q}\n", fmt.Sprint(s.reqBytes), budget)})
	createTopic(t, p, "flood")
	if msg := produceAndFetch(t, p, "flood", 10, 30*time.Second); msg != "" {
		t.Fatal("before the flood: " + msg)
	}
	base = p.RSS()
	conns := flood(t, p, s)
	if wantServed {
		if msg := produceAndFetch(t, p, "flood", 100, 30*time.Second); msg != "" {
			t.Fatal("during the flood: " + msg)
		}
	}
	peak = p.PeakRSS()
	for _, c := range conns {
		c.Close()
	}
	return base, peak
}

// Connections that each send most of a large request and stall must not pin memory
// beyond the budget, and ordinary clients keep producing and fetching meanwhile.
func TestPartialRequestFlood(t *testing.T) {
	s := partialSize()
	base, peak := runPartialFlood(t, s, fmt.Sprint(s.budget), true)
	// The budget's bytes, once more for a frame buffer's last growth (the old buffer
	// and the new one live together while it is copied) and for Go's heap goal (twice
	// the live heap), over what the broker held before the flood.
	bound := base + 3*int64(s.budget)
	t.Logf("partial-request flood (%d conns x %d MiB of %d MiB, budget %d MiB): baseline RSS %d MiB, peak %d MiB, bound %d MiB",
		s.conns, s.sendBytes/mib, s.reqBytes/mib, s.budget/mib, base/mib, peak/mib, bound/mib)
	if peak > bound {
		t.Fatalf("peak RSS %d MiB over the bound %d MiB", peak/mib, bound/mib)
	}
}

// The same flood with the budget lifted (Kafka's -1): what main did. Only measured.
func TestPartialRequestFloodUnbounded(t *testing.T) {
	skipUnlessBefore(t)
	s := partialSize()
	base, peak := runPartialFlood(t, s, "-1", false)
	t.Logf("partial-request flood, queued.max.request.bytes -1: baseline RSS %d MiB, peak %d MiB", base/mib, peak/mib)
}

// bombSize is the decompression flood: n concurrent produce requests, each one batch
// of a single record of inflate zero bytes (within the per-batch limit, and for zstd,
// whose decoder history is as large as its output, within half the budget); budget is
// queued.max.decompressed.bytes.
func bombSize() (n, inflate, budget int) {
	if brokerproc.Full() {
		// The largest bomb every codec keeps within the per-batch limit
		// (recordbatch.DefaultMaxUncompressed: 64 MiB plus 32 times the compressed
		// size, which is small for a bomb).
		return 16, 64 * mib, 256 * mib
	}
	return 16, 24 * mib, 64 * mib
}

func runBombs(t *testing.T, budget string) (base, peak int64, ok, retry int) {
	n, inflate, _ := bombSize()
	p := brokerproc.Start(t, brokerproc.Options{Config: fmt.Sprintf("configs: {queued.max.decompressed.bytes: %q}\n", budget)})
	id := createTopic(t, p, "bombs")
	// One bomb per codec (the flood takes turns); each compresses to little. Not
	// snappy: it expands at most 22 times, so its bombs are not worth the name.
	var bombs [][]byte
	for _, codec := range []int{recordbatch.CodecZstd, recordbatch.CodecGzip, recordbatch.CodecLZ4} {
		b := recordbatch.Build(recordbatch.Options{Codec: codec, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			BaseTimestamp: time.Now().UnixMilli()}, recordbatch.Record{Value: make([]byte, inflate)})
		if len(b) > 1<<20 {
			t.Fatalf("the codec %d bomb is %d bytes compressed", codec, len(b))
		}
		bombs = append(bombs, b)
	}
	base = p.RSS()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		batch := bombs[i%len(bombs)]
		cl := p.Client(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = 1, 30000
			tp := kmsg.NewProduceRequestTopic()
			tp.Topic, tp.TopicID = "bombs", id // v13+ names topics by id
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Records = bytes.Clone(batch)
			tp.Partitions = append(tp.Partitions, pp)
			req.Topics = append(req.Topics, tp)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Error(err)
				return
			}
			code := resp.Topics[0].Partitions[0].ErrorCode
			mu.Lock()
			defer mu.Unlock()
			switch code {
			case 0:
				ok++
			case kerr.RequestTimedOut.Code:
				retry++
			default:
				t.Errorf("bomb answered %v", kerr.ErrorForCode(code))
			}
		}()
	}
	wg.Wait()
	return base, p.PeakRSS(), ok, retry
}

// Concurrent decompression bombs, each within the per-batch limit, are decoded a
// budget's worth at a time: they pass (or are told to retry), and memory follows the
// budget, not the number of bombs.
func TestDecompressionBombFlood(t *testing.T) {
	n, inflate, budget := bombSize()
	base, peak, ok, retry := runBombs(t, fmt.Sprint(budget))
	// The reserved output (the budget), as much again for the buffers of the smaller
	// tries a batch that outgrew its reservation dropped, all doubled for Go's heap
	// goal (twice the live heap).
	bound := base + 4*int64(budget)
	t.Logf("decompression-bomb flood (%d x %d MiB, budget %d MiB): baseline RSS %d MiB, peak %d MiB, bound %d MiB; %d stored, %d told to retry",
		n, inflate/mib, budget/mib, base/mib, peak/mib, bound/mib, ok, retry)
	if ok == 0 {
		t.Fatal("no bomb within the limits was stored")
	}
	if peak > bound {
		t.Fatalf("peak RSS %d MiB over the bound %d MiB", peak/mib, bound/mib)
	}
}

func TestDecompressionBombFloodUnbounded(t *testing.T) {
	skipUnlessBefore(t)
	n, inflate, _ := bombSize()
	base, peak, _, _ := runBombs(t, fmt.Sprint(int64(1)<<40))
	t.Logf("decompression-bomb flood (%d x %d MiB) without a budget: baseline RSS %d MiB, peak %d MiB", n, inflate/mib, base/mib, peak/mib)
}

func uploadSize() (n, size int) {
	if brokerproc.Full() {
		return 8, 64 * mib
	}
	return 8, 24 * mib
}

func runUploads(t *testing.T, config string) (base, peak int64, codes map[int]int) {
	n, size := uploadSize()
	p := brokerproc.Start(t, brokerproc.Options{Config: config})
	createTopic(t, p, "in")
	body := make([]byte, size) // not WASM: refused 400 once read and compiled
	base = p.RSS()
	codes = map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/v1/transforms/t%d?input=in", p.AdminAddr, i), bytes.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return base, p.PeakRSS(), codes
}

// Concurrent admin uploads are served a few at a time (the rest refused 429 at once),
// so memory follows the concurrency limit, not the number of uploads.
func TestConcurrentAdminUploads(t *testing.T) {
	n, size := uploadSize()
	base, peak, codes := runUploads(t, "admin_max_concurrent_uploads: 2\n")
	// Two bodies in flight, each with a compile's worth on top.
	bound := base + 2*4*int64(size)
	t.Logf("admin uploads (%d x %d MiB, 2 at once): baseline RSS %d MiB, peak %d MiB, bound %d MiB; statuses %v",
		n, size/mib, base/mib, peak/mib, bound/mib, codes)
	for c := range codes {
		if c != http.StatusBadRequest && c != http.StatusTooManyRequests {
			t.Errorf("an upload was answered %d", c)
		}
	}
	if codes[http.StatusBadRequest] == 0 {
		t.Error("no upload was served")
	}
	if peak > bound {
		t.Fatalf("peak RSS %d MiB over the bound %d MiB", peak/mib, bound/mib)
	}
}

func TestConcurrentAdminUploadsUnbounded(t *testing.T) {
	skipUnlessBefore(t)
	n, size := uploadSize()
	base, peak, codes := runUploads(t, fmt.Sprintf("admin_max_concurrent_uploads: %d\n", n))
	t.Logf("admin uploads (%d x %d MiB, all at once): baseline RSS %d MiB, peak %d MiB; statuses %v", n, size/mib, base/mib, peak/mib, codes)
}

// A module over max_upload_bytes is refused 413 before it is read whole.
func TestAdminUploadTooLarge(t *testing.T) {
	p := brokerproc.Start(t, brokerproc.Options{Config: "modules: {transforms: {max_upload_bytes: 1048576}}\n"})
	createTopic(t, p, "in")
	req, _ := http.NewRequest(http.MethodPut, "http://"+p.AdminAddr+"/v1/transforms/big?input=in", bytes.NewReader(make([]byte, 2*mib)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB module over a 1 MiB max_upload_bytes: %d", resp.StatusCode)
	}
}

// TestMemoryLimitApplied starts the broker with sluice.memory.limit.bytes and checks the
// runtime took it (its /metrics gauge and the start log line), and that without the
// config and outside a limited cgroup the broker leaves the runtime alone.
func TestMemoryLimitApplied(t *testing.T) {
	limitMetric := func(p *brokerproc.Proc) string {
		t.Helper()
		resp, err := http.Get("http://" + p.AdminAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		if _, err := body.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(body.String()) {
			if v, ok := strings.CutPrefix(line, "sluice_go_memory_limit_bytes "); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no sluice_go_memory_limit_bytes in /metrics")
		return ""
	}
	env := []string{"GOMEMLIMIT="} // the test's own environment must not decide
	p := brokerproc.Start(t, brokerproc.Options{Env: env, Config: "configs: {sluice.memory.limit.bytes: \"671088640\"}\n"})
	if got := limitMetric(p); got != "6.7108864e+08" {
		t.Fatalf("limit gauge %s, want 671088640", got)
	}
	if !strings.Contains(p.Stderr(), "soft memory limit") || !strings.Contains(p.Stderr(), "source=config") {
		t.Fatalf("no start line naming the limit:\n%s", p.Stderr())
	}
	if limited, err := memlimit.FromCgroup(); err == nil && limited < 1<<62 {
		t.Skipf("this test runs in a cgroup limited to %d bytes: the default is not 'none' here", limited)
	}
	q := brokerproc.Start(t, brokerproc.Options{Env: env})
	if got := limitMetric(q); got != "9.223372036854776e+18" {
		t.Fatalf("limit gauge %s without the config, want none (MaxInt64)", got)
	}
}
