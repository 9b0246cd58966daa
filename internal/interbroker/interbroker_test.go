package interbroker

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
	"github.com/sluicehq/sluice/kernel"
)

// info is the BrokerInfo the kernel would give: listeners with their protocols.
func info(configs map[string]string, listeners ...string) kernel.BrokerInfo {
	bi := kernel.BrokerInfo{NodeID: 1, StaticConfigs: configs}
	protos, err := kernel.ListenerProtocols(configs, listeners)
	if err != nil {
		panic(err)
	}
	for i, l := range listeners {
		bi.Listeners = append(bi.Listeners, kernel.ListenerInfo{Name: l, Host: "127.0.0.1", Port: 9092, Protocol: protos[i]})
	}
	return bi
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

const scramJAAS = `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="secret";`

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	ks := tlstest.WriteFile(t, dir, "server.pem", ca.Server(t, "b1").KeyStore())
	ts := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)
	withTLS := func(m map[string]string) map[string]string {
		m["ssl.keystore.location"], m["ssl.truststore.location"] = ks, ts
		return m
	}
	for _, tc := range []struct {
		name      string
		bi        kernel.BrokerInfo
		listener  string
		protocol  string
		tls, sasl bool
		err       string
		credErr   string
	}{
		{name: "first listener", bi: info(map[string]string{}, "PLAINTEXT", "SSL"), listener: "PLAINTEXT", protocol: "PLAINTEXT"},
		{name: "no listener", bi: info(map[string]string{}), listener: "", protocol: "PLAINTEXT"},
		{name: "named, mapped", bi: info(withTLS(map[string]string{"inter.broker.listener.name": "INTERNAL", "listener.security.protocol.map": "EXTERNAL:SASL_SSL,INTERNAL:SSL"}), "EXTERNAL", "INTERNAL"),
			listener: "INTERNAL", protocol: "SSL", tls: true},
		{name: "by protocol", bi: info(withTLS(map[string]string{"security.inter.broker.protocol": "SASL_SSL", "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scramJAAS}), "PLAINTEXT", "SASL_SSL"),
			listener: "SASL_SSL", protocol: "SASL_SSL", tls: true, sasl: true},
		{name: "sasl without credentials", bi: info(map[string]string{}, "SASL_PLAINTEXT"), listener: "SASL_PLAINTEXT", protocol: "SASL_PLAINTEXT", sasl: true,
			credErr: "set listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"},
		{name: "plain mechanism wants its own config", bi: info(map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scramJAAS}, "SASL_PLAINTEXT"),
			listener: "SASL_PLAINTEXT", protocol: "SASL_PLAINTEXT", sasl: true, credErr: "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{name: "both set", bi: info(map[string]string{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "PLAINTEXT"), err: "only one"},
		{name: "unknown listener", bi: info(map[string]string{"inter.broker.listener.name": "NOPE"}, "PLAINTEXT"), err: "not one of the listeners"},
		{name: "no listener of protocol", bi: info(map[string]string{"security.inter.broker.protocol": "SSL"}, "PLAINTEXT"), err: "no listener has that protocol"},
		{name: "gssapi", bi: info(map[string]string{"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "SASL_PLAINTEXT"), err: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{name: "module mismatch", bi: info(map[string]string{"sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": scramJAAS}, "SASL_PLAINTEXT"), err: "does not serve PLAIN"},
		{name: "bad jaas", bi: info(map[string]string{"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": `x required;`}, "SASL_PLAINTEXT"), err: "sasl.jaas.config"},
		{name: "ssl without stores", bi: info(map[string]string{"ssl.keystore.location": dir + "/missing.pem"}, "SSL"), err: "ssl.keystore.location"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.bi, discard())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Fatalf("error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Listener != tc.listener || s.Protocol != tc.protocol || s.TLS() != tc.tls || (s.ClientTLS("h") != nil) != tc.tls {
				t.Fatalf("got %+v", s)
			}
			mech, err := s.Mechanism()
			switch {
			case tc.credErr != "":
				if !errors.Is(err, ErrNoCredentials) || !strings.Contains(err.Error(), tc.credErr) || !errors.Is(s.CheckCredentials(), ErrNoCredentials) {
					t.Fatalf("mechanism %v, %v", mech, err)
				}
			case err != nil || (mech != nil) != tc.sasl:
				t.Fatalf("mechanism %v, %v", mech, err)
			case tc.sasl && mech.Name() != "SCRAM-SHA-512":
				t.Fatalf("mechanism %s", mech.Name())
			}
		})
	}
}

// TestRaftServerTLS: the raft port wants a client certificate of the trust store's
// CA even with ssl.client.auth none, and refuses to start without a trust store.
func TestRaftServerTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	other := tlstest.NewCA(t, "other")
	ks := tlstest.WriteFile(t, dir, "server.pem", ca.Server(t, "b1").KeyStore())
	ts := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)
	if _, err := mustNew(t, map[string]string{"ssl.keystore.location": ks}).RaftServerTLS(); err == nil || !strings.Contains(err.Error(), "ssl.truststore.location") {
		t.Fatalf("no trust store: %v", err)
	}
	s := mustNew(t, map[string]string{"ssl.keystore.location": ks, "ssl.truststore.location": ts, "ssl.client.auth": "none"})
	srv, err := s.RaftServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	try := func(cli *tls.Config) error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		errc := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			errc <- tls.Server(c, srv).Handshake()
		}()
		c, err := tls.Dial("tcp", ln.Addr().String(), cli)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1)) // TLS 1.3: the server's refusal arrives here
			c.Close()
			if errors.Is(err, io.EOF) {
				err = nil // the server closed after a good handshake
			}
		}
		return errors.Join(err, <-errc)
	}
	if err := try(s.ClientTLS("127.0.0.1")); err != nil {
		t.Fatalf("broker to broker: %v", err)
	}
	if err := try(&tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}); err == nil {
		t.Fatal("a client without a certificate got in")
	}
	stranger := other.Server(t, "x").TLS(t)
	if err := try(&tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{stranger}}); err == nil {
		t.Fatal("a certificate of another CA got in")
	}
	plain := mustNewL(t, map[string]string{}, "PLAINTEXT")
	if c, err := plain.RaftServerTLS(); c != nil || err != nil {
		t.Fatalf("plaintext: %v %v", c, err)
	}
}

func mustNew(t *testing.T, cfg map[string]string) *Security { return mustNewL(t, cfg, "SSL") }

func mustNewL(t *testing.T, cfg map[string]string, l string) *Security {
	t.Helper()
	s, err := New(info(cfg, l), discard())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
