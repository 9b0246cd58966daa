package kclient

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// tlsFake is fakeServer behind TLS with a certificate of ca (client certificates
// required and verified against ca when mtls).
func tlsFake(t *testing.T, ca *tlstest.CA, mtls bool, fn func(key, version int16, corr int32, clientID string, flexTags bool, body []byte) []byte) string {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "broker").TLS(t)}, MinVersion: tls.VersionTLS12}
	if mtls {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, tls.NewListener(ln, cfg), fn)
}

// metadataOK answers every request with its empty response.
func metadataOK(key, ver int16, corr int32, _ string, _ bool, _ []byte) []byte {
	return reply(key, ver, corr, kmsg.RequestForKey(key).ResponseKind())
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster-ca")
	other := tlstest.NewCA(t, "other-ca")
	client := ca.Server(t, "broker-2") // a broker's certificate serves as client certificate too
	for _, tc := range []struct {
		name    string
		cfg     *tls.Config
		wantErr bool
	}{
		{"trusted, with a client certificate", &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS(t)}}, false},
		{"server of another CA", &tls.Config{RootCAs: other.Pool(), Certificates: []tls.Certificate{client.TLS(t)}}, true},
		{"no client certificate", &tls.Config{RootCAs: ca.Pool()}, true},
		{"client certificate of another CA", &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{other.Server(t, "intruder").TLS(t)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := tlsFake(t, ca, true, metadataOK) // it serves one connection
			c, err := Dial(ctx10(t), addr, Options{ClientID: "me", TLS: tc.cfg})
			if err == nil {
				defer c.Close()
				req := kmsg.NewPtrMetadataRequest()
				req.SetVersion(9)
				_, err = c.Request(ctx10(t), req) // TLS 1.3: a refused client certificate shows here
			}
			if tc.wantErr != (err != nil) {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, ErrTLS) && !strings.Contains(err.Error(), "tls") {
				t.Fatalf("err %v is not a TLS error", err)
			}
		})
	}
}

// TestTLSHandshakeDeadline: a server that accepts but never answers the handshake
// fails the dial after DialTimeout, not never.
func TestTLSHandshakeDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	_, err = Dial(context.Background(), ln.Addr().String(), Options{DialTimeout: 300 * time.Millisecond, TLS: &tls.Config{}})
	if !errors.Is(err, ErrTLS) {
		t.Fatalf("err %v, want ErrTLS", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("dial took %v", d)
	}
}

// TestSASLKfake logs in to franz-go's kfake over TLS with SCRAM-SHA-512,
// SCRAM-SHA-256 and PLAIN, and is refused with a wrong password or a mechanism the
// broker does not have.
func TestSASLKfake(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster-ca")
	srv := &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "kfake").TLS(t)}, MinVersion: tls.VersionTLS12}
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.TLS(srv),
		kfake.Superuser("SCRAM-SHA-512", "broker", "secret"),
		kfake.Superuser("SCRAM-SHA-256", "broker256", "secret256"),
		kfake.Superuser("PLAIN", "plainbroker", "plain-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	addr := cl.ListenAddrs()[0]
	cli := &tls.Config{RootCAs: ca.Pool()}
	for _, tc := range []struct {
		name    string
		mech    sasl.Mechanism
		refused bool
	}{
		{"scram-sha-512", scram.Auth{User: "broker", Pass: "secret"}.AsSha512Mechanism(), false},
		{"scram-sha-256", scram.Auth{User: "broker256", Pass: "secret256"}.AsSha256Mechanism(), false},
		{"plain", plain.Auth{User: "plainbroker", Pass: "plain-secret"}.AsMechanism(), false},
		{"scram wrong password", scram.Auth{User: "broker", Pass: "wrong"}.AsSha512Mechanism(), true},
		{"plain wrong password", plain.Auth{User: "plainbroker", Pass: "nope"}.AsMechanism(), true},
		{"unknown user", scram.Auth{User: "nobody", Pass: "secret"}.AsSha512Mechanism(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(ctx10(t), addr, Options{ClientID: "sluice-test", TLS: cli, SASL: tc.mech})
			if tc.refused {
				// kfake closes the connection instead of answering
				// SASL_AUTHENTICATION_FAILED (TestSASLFake checks the code).
				if !errors.Is(err, ErrSASL) {
					t.Fatalf("err %v, want ErrSASL", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			vers, err := c.APIVersions(ctx10(t))
			if err != nil || vers[kmsg.Metadata.Int16()] < 9 {
				t.Fatalf("versions %v, %v", vers, err)
			}
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(9)
			r, err := c.Request(ctx10(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.(*kmsg.MetadataResponse).Brokers) != 1 {
				t.Fatalf("metadata %+v", r)
			}
		})
	}
	// Without SASL the broker answers nothing but ApiVersions and the SASL keys.
	c, err := Dial(ctx10(t), addr, Options{TLS: cli})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9)
	if _, err := c.Request(ctx10(t), req); err == nil {
		t.Fatal("metadata without SASL succeeded")
	}
}

// saslFake answers ApiVersions, SaslHandshake (offering mechs) and SaslAuthenticate
// with auth's result.
func saslFake(t *testing.T, mechs []string, auth func(step int, msg []byte) *kmsg.SASLAuthenticateResponse) string {
	step := 0
	return fakeServer(t, func(key, ver int16, corr int32, _ string, _ bool, body []byte) []byte {
		switch key {
		case kmsg.ApiVersions.Int16():
			resp := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []kmsg.Key{kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate, kmsg.Metadata} {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MaxVersion = k.Int16(), kmsg.RequestForKey(k.Int16()).MaxVersion()
				resp.ApiKeys = append(resp.ApiKeys, ak)
			}
			return reply(key, ver, corr, resp)
		case kmsg.SASLHandshake.Int16():
			req := kmsg.NewPtrSASLHandshakeRequest()
			req.SetVersion(ver)
			if err := req.ReadFrom(body); err != nil {
				return nil
			}
			resp := kmsg.NewPtrSASLHandshakeResponse()
			resp.SupportedMechanisms = mechs
			found := false
			for _, m := range mechs {
				found = found || m == req.Mechanism
			}
			if !found {
				resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			}
			return reply(key, ver, corr, resp)
		case kmsg.SASLAuthenticate.Int16():
			req := kmsg.NewPtrSASLAuthenticateRequest()
			req.SetVersion(ver)
			if err := req.ReadFrom(body); err != nil {
				return nil
			}
			step++
			return reply(key, ver, corr, auth(step, req.SASLAuthBytes))
		}
		return metadataOK(key, ver, corr, "", false, nil)
	})
}

// endless is a mechanism that never finishes.
type endless struct{}

func (endless) Name() string { return "PLAIN" }
func (endless) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return endless{}, []byte("hello"), nil
}
func (endless) Challenge([]byte) (bool, []byte, error) { return false, []byte("more"), nil }

func TestSASLFake(t *testing.T) {
	okResp := func(lifetime int64) func(int, []byte) *kmsg.SASLAuthenticateResponse {
		return func(int, []byte) *kmsg.SASLAuthenticateResponse {
			r := kmsg.NewPtrSASLAuthenticateResponse()
			r.SessionLifetimeMillis = lifetime
			return r
		}
	}
	t.Run("session lifetime", func(t *testing.T) {
		addr := saslFake(t, []string{"PLAIN"}, okResp(60_000))
		before := time.Now()
		c, err := Dial(ctx10(t), addr, Options{SASL: plain.Auth{User: "u", Pass: "p"}.AsMechanism()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ra := c.ReauthAfter()
		if ra.Before(before.Add(50*time.Second)) || ra.After(time.Now().Add(55*time.Second)) {
			t.Fatalf("ReauthAfter %v (now %v)", ra, time.Now())
		}
	})
	t.Run("no lifetime", func(t *testing.T) {
		addr := saslFake(t, []string{"PLAIN"}, okResp(0))
		c, err := Dial(ctx10(t), addr, Options{SASL: plain.Auth{User: "u", Pass: "p"}.AsMechanism()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !c.ReauthAfter().IsZero() {
			t.Fatalf("ReauthAfter %v", c.ReauthAfter())
		}
	})
	t.Run("mechanism not offered", func(t *testing.T) {
		addr := saslFake(t, []string{"SCRAM-SHA-256"}, okResp(0))
		_, err := Dial(ctx10(t), addr, Options{SASL: plain.Auth{User: "u", Pass: "p"}.AsMechanism()})
		if !errors.Is(err, ErrSASL) || !errors.Is(err, kerr.UnsupportedSaslMechanism) || !strings.Contains(err.Error(), "SCRAM-SHA-256") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("refused with a message", func(t *testing.T) {
		addr := saslFake(t, []string{"PLAIN"}, func(int, []byte) *kmsg.SASLAuthenticateResponse {
			r := kmsg.NewPtrSASLAuthenticateResponse()
			r.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "Authentication failed: Invalid username or password"
			r.ErrorMessage = &msg
			return r
		})
		_, err := Dial(ctx10(t), addr, Options{SASL: plain.Auth{User: "u", Pass: "p"}.AsMechanism()})
		if !errors.Is(err, ErrSASL) || !strings.Contains(err.Error(), "Invalid username") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("endless exchange", func(t *testing.T) {
		addr := saslFake(t, []string{"PLAIN"}, okResp(0))
		_, err := Dial(ctx10(t), addr, Options{SASL: endless{}})
		if !errors.Is(err, ErrSASL) || !strings.Contains(err.Error(), "steps") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("broker without SASL", func(t *testing.T) {
		addr := fakeServer(t, func(key, ver int16, corr int32, _ string, _ bool, _ []byte) []byte {
			resp := kmsg.NewPtrApiVersionsResponse()
			ak := kmsg.NewApiVersionsResponseApiKey()
			ak.ApiKey, ak.MaxVersion = kmsg.Fetch.Int16(), 12
			resp.ApiKeys = append(resp.ApiKeys, ak)
			return reply(key, ver, corr, resp)
		})
		_, err := Dial(ctx10(t), addr, Options{SASL: plain.Auth{User: "u", Pass: "p"}.AsMechanism()})
		if !errors.Is(err, ErrSASL) || !strings.Contains(err.Error(), "SASL_SSL") {
			t.Fatalf("err %v", err)
		}
	})
}
