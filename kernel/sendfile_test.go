package kernel

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

func tempFile(t testing.TB, data []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A range past the end of the file fails (the frame promised those bytes) on TCP and on
// other connections, after sending what the file had.
func TestSendFileShorterThanRange(t *testing.T) {
	f := tempFile(t, []byte("0123456789"))
	w, r := tcpPair(t)
	if err := sendFile(w, f, 4, 100); !errors.Is(err, errShortFile) {
		t.Fatalf("tcp: err %v, want errShortFile", err)
	}
	w.Close()
	got, _ := io.ReadAll(r)
	if string(got) != "456789" {
		t.Fatalf("tcp: sent %q", got)
	}

	pw, pr := net.Pipe()
	defer pr.Close()
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(pr); done <- b }()
	if err := sendFile(pw, f, 4, 100); !errors.Is(err, errShortFile) {
		t.Fatalf("pipe: err %v, want errShortFile", err)
	}
	pw.Close()
	if got := <-done; string(got) != "456789" {
		t.Fatalf("pipe: sent %q", got)
	}
}

// A range much larger than the socket buffer goes out whole through partial writes and
// EAGAIN waits, to a reader slower than the writer.
func TestSendFileLargeRangeSlowReader(t *testing.T) {
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f := tempFile(t, data)
	w, r := tcpPair(t)
	_ = w.SetWriteDeadline(time.Now().Add(30 * time.Second))
	errc := make(chan error, 1)
	go func() {
		errc <- writeChunks(w, []byte("hdr"), []Chunk{{File: f, Off: 1, N: int64(len(data) - 2)}, {Bytes: []byte("end")}}, func() {}, new(inlinePool))
	}()
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for got.Len() < len(data)-2+6 {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("read after %d bytes: %v", got.Len(), err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte("hdr"), data[1:len(data)-1]...), "end"...)
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("bytes differ")
	}
}

// A peer that never reads makes sendfile give up at the write deadline instead of
// blocking the connection's processor forever.
func TestSendFileHonoursWriteDeadline(t *testing.T) {
	f := tempFile(t, make([]byte, 64<<20))
	w, _ := tcpPair(t)
	_ = w.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	errc := make(chan error, 1)
	go func() { errc <- sendFile(w, f, 0, 64<<20) }()
	select {
	case err := <-errc:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sendfile still blocked long after its write deadline")
	}
}

// Small file ranges are inlined and large ones sent with sendfile, in any mix and past
// the inline budget, and the receiver gets exactly the bytes in order; a small range
// past the end of its file fails the write as sendfile would.
func TestWriteChunksInlinesSmallRanges(t *testing.T) {
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*31 + i>>11)
	}
	f := tempFile(t, data)
	var chunks []Chunk
	want := []byte("hdr")
	off := int64(0)
	for i := range 200 {
		n := int64(100 + i*37%inlineMax) // small: 200 of them pass inlineBudget
		if i%17 == 0 {
			n = inlineMax + 1 + int64(i)*100 // large: sendfile
		}
		chunks = append(chunks, Chunk{Bytes: []byte{byte(i)}}, Chunk{File: f, Off: off, N: n})
		want = append(append(want, byte(i)), data[off:off+n]...)
		off = (off + n + 7) % int64(len(data)-2*inlineMax-30000)
	}
	pool := new(inlinePool)
	for _, name := range []string{"tcp", "pipe"} {
		var w, r net.Conn
		if name == "tcp" {
			w, r = tcpPair(t)
		} else {
			w, r = net.Pipe()
			defer w.Close()
			defer r.Close()
		}
		_ = w.SetWriteDeadline(time.Now().Add(30 * time.Second))
		errc := make(chan error, 1)
		go func() { errc <- writeChunks(w, []byte("hdr"), chunks, func() {}, pool) }()
		got := make([]byte, len(want))
		_ = r.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: bytes differ", name)
		}
	}
	w, r := tcpPair(t)
	go func() { _, _ = io.Copy(io.Discard, r) }()
	err := writeChunks(w, []byte("hdr"), []Chunk{{File: f, Off: int64(len(data)) - 10, N: 100}}, func() {}, pool)
	if !errors.Is(err, errShortFile) {
		t.Fatalf("short small range: err %v, want errShortFile", err)
	}
}
