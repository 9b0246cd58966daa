package kclient

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeServer accepts one connection and hands each request frame to fn, which returns
// the response frame payload to write (nil: write nothing).
func fakeServer(t *testing.T, fn func(key, version int16, corr int32, clientID string, flexTags bool, body []byte) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, ln, fn)
}

// serveFake is fakeServer on a listener of the caller's (a TLS one).
func serveFake(t *testing.T, ln net.Listener, fn func(key, version int16, corr int32, clientID string, flexTags bool, body []byte) []byte) string {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		var buf []byte
		for {
			buf, err = readFrame(nc, buf, 1<<20)
			if err != nil {
				return
			}
			key := int16(binary.BigEndian.Uint16(buf))
			ver := int16(binary.BigEndian.Uint16(buf[2:]))
			corr := int32(binary.BigEndian.Uint32(buf[4:]))
			l := int16(binary.BigEndian.Uint16(buf[8:]))
			rest := buf[10:]
			id := ""
			if l >= 0 {
				id, rest = string(rest[:l]), rest[l:]
			}
			req := kmsg.RequestForKey(key)
			req.SetVersion(ver)
			flex := false
			if req.IsFlexible() {
				flex = len(rest) > 0 && rest[0] == 0
				rest = rest[1:]
			}
			out := fn(key, ver, corr, id, flex, rest)
			if out == nil {
				continue
			}
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(out)))
			if _, err := nc.Write(append(frame, out...)); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// reply encodes a response to a request of key/version with correlation corr.
func reply(key, version int16, corr int32, resp kmsg.Response) []byte {
	resp.SetVersion(version)
	out := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		out = append(out, 0)
	}
	return resp.AppendTo(out)
}

func dial(t *testing.T, addr string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), addr, Options{ClientID: "me", MaxResponseBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestHeaders(t *testing.T) {
	type seen struct {
		key, ver int16
		corr     int32
		id       string
		flex     bool
		body     []byte
	}
	got := make(chan seen, 4)
	addr := fakeServer(t, func(key, ver int16, corr int32, id string, flex bool, body []byte) []byte {
		got <- seen{key, ver, corr, id, flex, append([]byte(nil), body...)}
		req := kmsg.RequestForKey(key)
		return reply(key, ver, corr, req.ResponseKind())
	})
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, tc := range []struct {
		req  kmsg.Request
		v    int16
		flex bool
	}{
		{kmsg.NewPtrListOffsetsRequest(), 1, false},
		{kmsg.NewPtrFetchRequest(), 12, true},
		{kmsg.NewPtrApiVersionsRequest(), 3, true},
	} {
		tc.req.SetVersion(tc.v)
		if _, err := c.Request(ctx, tc.req); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		s := <-got
		if s.key != tc.req.Key() || s.ver != tc.v || s.corr != int32(i+1) || s.id != "me" || s.flex != tc.flex {
			t.Fatalf("%d: header %+v", i, s)
		}
		if want := tc.req.AppendTo(nil); string(want) != string(s.body) {
			t.Fatalf("%d: body differs", i)
		}
	}
}

func TestCorrelationMismatchBreaks(t *testing.T) {
	addr := fakeServer(t, func(key, ver int16, corr int32, _ string, _ bool, _ []byte) []byte {
		return reply(key, ver, corr+7, kmsg.RequestForKey(key).ResponseKind())
	})
	c := dial(t, addr)
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Request(ctx, req); !errors.Is(err, ErrCorrelation) {
		t.Fatalf("got %v, want ErrCorrelation", err)
	}
	if _, err := c.Request(ctx, req); !errors.Is(err, ErrBroken) {
		t.Fatalf("second request: %v, want ErrBroken", err)
	}
}

func TestFrameBound(t *testing.T) {
	addr := fakeServer(t, func(key, ver int16, corr int32, _ string, _ bool, _ []byte) []byte {
		return make([]byte, 8192) // above the 4096 bound
	})
	c := dial(t, addr)
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Request(ctx, req); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("got %v, want ErrFrameSize", err)
	}
}

func TestTruncatedResponse(t *testing.T) {
	addr := fakeServer(t, func(key, ver int16, corr int32, _ string, _ bool, _ []byte) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(corr)) // no body at all
	})
	c := dial(t, addr)
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Request(ctx, req); err == nil {
		t.Fatal("a response without a body decoded")
	}
}

// A server that never answers: the context's deadline, or its cancellation without a
// deadline, ends the request promptly and breaks the Conn.
func TestContextEndsRequest(t *testing.T) {
	for _, tc := range []string{"deadline", "cancel", "close"} {
		t.Run(tc, func(t *testing.T) {
			addr := fakeServer(t, func(int16, int16, int32, string, bool, []byte) []byte { return nil })
			c := dial(t, addr)
			req := kmsg.NewPtrListOffsetsRequest()
			req.SetVersion(1)
			var ctx context.Context
			var cancel context.CancelFunc
			switch tc {
			case "deadline":
				ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
			default:
				ctx, cancel = context.WithCancel(context.Background())
			}
			defer cancel()
			errc := make(chan error, 1)
			start := time.Now()
			go func() { _, err := c.Request(ctx, req); errc <- err }()
			switch tc {
			case "cancel":
				time.AfterFunc(100*time.Millisecond, cancel)
			case "close":
				time.AfterFunc(100*time.Millisecond, func() { c.Close() })
			}
			select {
			case err := <-errc:
				switch tc {
				case "deadline":
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("got %v", err)
					}
				case "cancel":
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("got %v", err)
					}
				default:
					if err == nil {
						t.Fatal("request on a closed Conn succeeded")
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("request still blocked")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %v", d)
			}
			if _, err := c.Request(context.Background(), req); !errors.Is(err, ErrBroken) {
				t.Fatalf("after: %v, want ErrBroken", err)
			}
		})
	}
}

func TestDialTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Dial(ctx, "127.0.0.1:1", Options{}); err == nil {
		t.Fatal("dial with a cancelled context succeeded")
	}
}

func TestReadFrameGrows(t *testing.T) {
	payload := make([]byte, 3<<20)
	for i := range payload {
		payload[i] = byte(i)
	}
	r, w := net.Pipe()
	go func() {
		_, _ = w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(payload))))
		_, _ = w.Write(payload)
		w.Close()
	}()
	got, err := readFrame(r, nil, 4<<20)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("err %v len %d", err, len(got))
	}
	if _, err := readFrame(r, got, 4<<20); !errors.Is(err, io.EOF) {
		t.Fatalf("after EOF: %v", err)
	}
}
