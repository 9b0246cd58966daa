package kernel

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// bigBodyModule answers Fetch with a large body: bytes, a file range, bytes.
type bigBodyModule struct{ body []Chunk }

func (m *bigBodyModule) Provision(ctx Context) error {
	return ctx.Handle(kmsg.Fetch.Int16(), 4, 4, func(context.Context, *Request) (Response, error) {
		return Response{Body: &Body{Chunks: m.body}}, nil
	})
}

// The write timeout bounds a stall, not a whole response: a consumer on a slow link
// that keeps reading gets a response that takes many times the timeout to send.
func TestWriteTimeoutBoundsStallsNotResponses(t *testing.T) {
	const size = 12 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	f := tempFile(t, data)
	mod := &bigBodyModule{body: []Chunk{{Bytes: data[:3<<20]}, {File: f, Off: 0, N: size}, {Bytes: data[:3<<20]}}}
	reg := NewRegistry()
	reg.Register(ModuleInfo{ID: "echo.big", New: func() Module { return mod }})
	k := plainKernel(t, reg, "modules: {echo: {use: big}}\n")
	// 1s, not less: on a loaded 2-core CI machine a scheduling stall of a few hundred
	// milliseconds is normal and must not be mistaken for a stalled reader.
	k.writeTimeout = time.Second
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Shutdown(context.Background()) })

	{
		nc, err := net.Dial("tcp", k.Addrs()[0].String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(4)
		if _, err := nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
			t.Fatal(err)
		}
		// A slow reader: 64 KiB every 10ms, about 3s (3x the timeout) for the whole response.
		want := 4 + 4 + 18<<20
		got := make([]byte, 0, want)
		buf := make([]byte, 64<<10)
		start := time.Now()
		for len(got) < want {
			n, err := io.ReadFull(nc, buf[:min(len(buf), want-len(got))])
			got = append(got, buf[:n]...)
			if err != nil {
				t.Fatalf("after %d of %d bytes (%v): %v", len(got), want, time.Since(start), err)
			}
			time.Sleep(10 * time.Millisecond) // the slow link, not synchronisation
		}
		if binary.BigEndian.Uint32(got) != uint32(want-4) || binary.BigEndian.Uint32(got[4:]) != 1 {
			t.Fatalf("frame header %x", got[:8])
		}
	}
}
