package rpc

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TestMuxTLS: with TLS the mux hands raft only connections that completed a mutual
// TLS handshake, a client that stalls its handshake holds up no one else, and a
// client without a certificate is closed.
func TestMuxTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert := ca.Server(t, "broker").TLS(t)
	sec := &TLS{
		Server: &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		Client: func(host string) *tls.Config {
			return &tls.Config{ServerName: host, RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := NewMux(ln, nil, log, func(c net.Conn) { _ = c.Close() }, sec)
	defer m.Close()
	addr := ln.Addr().String()

	// A client that connects and never says a word.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()

	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := m.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := m.Dial(raft.ServerAddress(addr), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*tls.Conn); !ok {
		t.Fatalf("Dial returned %T, not a TLS connection", c)
	}
	if _, err := c.Write([]byte{1, 2, 3}); err != nil { // a raft rpc type byte first
		t.Fatal(err)
	}
	var got net.Conn
	select {
	case got = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the raft connection was not accepted while another client stalls its handshake")
	}
	defer got.Close()
	b := make([]byte, 3)
	_ = got.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(got, b); err != nil || b[0] != 1 || b[2] != 3 {
		t.Fatalf("read %v, %v", b, err)
	}

	// No client certificate: closed, not handed on.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tc := tls.Client(nc, &tls.Config{ServerName: "127.0.0.1", RootCAs: ca.Pool()})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	err = tc.Handshake()
	if err == nil {
		_, err = tc.Write([]byte{1})
		if err == nil {
			_, err = tc.Read(make([]byte, 1))
		}
	}
	if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
		t.Fatalf("a client without a certificate was not refused: %v", err)
	}
}
