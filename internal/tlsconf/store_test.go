package tlsconf_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// handshake runs a TLS handshake between a server with srv and a client with cli over
// a pipe and returns the server's view of the connection.
func handshake(t *testing.T, srv, cli *tls.Config) (tls.ConnectionState, error, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sc := tls.Server(a, srv)
	cc := tls.Client(b, cli)
	errc := make(chan error, 1)
	go func() {
		err := cc.HandshakeContext(ctx)
		if err == nil {
			// TLS 1.3 client certificate failures arrive after the client's
			// handshake: read to see them.
			_ = cc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, rerr := cc.Read(make([]byte, 1))
			var ne net.Error
			if rerr != nil && !(errors.As(rerr, &ne) && ne.Timeout()) {
				err = rerr
			}
		}
		errc <- err
	}()
	serr := sc.HandshakeContext(ctx)
	if serr != nil {
		a.Close()
	}
	cerr := <-errc
	return sc.ConnectionState(), serr, cerr
}

func TestServerAndClientConfigs(t *testing.T) {
	ca := tlstest.NewCA(t, "test-ca")
	srvPair := ca.Server(t, "broker")
	alice := ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme"}, Country: []string{"US"}})
	dir := t.TempDir()
	ks := tlstest.WriteFile(t, dir, "server.pem", srvPair.KeyStore())
	ts := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)

	for _, tc := range []struct {
		name       string
		auth       string
		clientCert bool
		wantErr    bool
		wantPeer   bool
	}{
		{"none ignores a cert", "none", true, false, false},
		{"requested without cert", "requested", false, false, false},
		{"requested with cert", "requested", true, false, true},
		{"required without cert", "required", false, true, false},
		{"required with cert", "required", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tlsconf.New(map[string]string{
				"ssl.keystore.location": ks, "ssl.truststore.location": ts, "ssl.client.auth": tc.auth,
			}, discard())
			if err != nil {
				t.Fatal(err)
			}
			srv, err := st.ServerConfig()
			if err != nil {
				t.Fatal(err)
			}
			cli := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
			if tc.clientCert {
				cli.Certificates = []tls.Certificate{alice.TLS(t)}
			}
			cs, serr, cerr := handshake(t, srv, cli)
			if tc.wantErr {
				if serr == nil && cerr == nil {
					t.Fatal("handshake succeeded")
				}
				return
			}
			if serr != nil || cerr != nil {
				t.Fatalf("server %v, client %v", serr, cerr)
			}
			if got := len(cs.VerifiedChains) > 0; got != tc.wantPeer {
				t.Fatalf("verified client cert: %v, want %v", got, tc.wantPeer)
			}
			if tc.wantPeer {
				dn, err := tlsconf.SubjectDN(cs.PeerCertificates[0])
				if err != nil || dn != "CN=alice,OU=eng,O=Acme,C=US" {
					t.Fatalf("dn %q, %v", dn, err)
				}
			}
		})
	}
}

func TestClientConfigVerifiesServer(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	other := tlstest.NewCA(t, "other")
	srvPair := ca.Server(t, "broker")
	srvStore, err := tlsconf.New(map[string]string{
		"ssl.keystore.key": string(srvPair.KeyPEM), "ssl.keystore.certificate.chain": string(srvPair.CertPEM),
	}, discard())
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := srvStore.ServerConfig()
	for _, tc := range []struct {
		name, trust, host, alg string
		ok                     bool
	}{
		{"host checked", string(ca.PEM), "localhost", "https", true},
		{"wrong host", string(ca.PEM), "elsewhere", "https", false},
		{"wrong host, no identification", string(ca.PEM), "elsewhere", "", true},
		{"untrusted", string(other.PEM), "localhost", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tlsconf.New(map[string]string{"ssl.truststore.certificates": tc.trust, "ssl.endpoint.identification.algorithm": tc.alg}, discard())
			if err != nil {
				t.Fatal(err)
			}
			_, _, cerr := handshake(t, srv, st.ClientConfig(tc.host))
			if (cerr == nil) != tc.ok {
				t.Fatalf("client handshake: %v, want ok %v", cerr, tc.ok)
			}
		})
	}
}

func TestStoreErrors(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	p := ca.Server(t, "b")
	q := ca.Server(t, "c")
	dir := t.TempDir()
	ks := tlstest.WriteFile(t, dir, "ks.pem", p.KeyStore())
	mismatched := tlstest.WriteFile(t, dir, "mm.pem", append(append([]byte{}, p.KeyPEM...), q.CertPEM...))
	keyOnly := tlstest.WriteFile(t, dir, "k.pem", p.KeyPEM)
	for _, tc := range []struct {
		name string
		cfg  map[string]string
		want string
	}{
		{"jks", map[string]string{"ssl.keystore.type": "JKS"}, "only PEM"},
		{"key store password with PEM", map[string]string{"ssl.keystore.password": "x"}, "only key password"},
		{"trust store password with PEM", map[string]string{"ssl.truststore.password": "x"}, "cannot be specified for PEM"},
		{"client auth", map[string]string{"ssl.client.auth": "maybe"}, "ssl.client.auth"},
		{"old tls", map[string]string{"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "below the TLSv1.2 minimum"},
		{"unknown protocol", map[string]string{"ssl.enabled.protocols": "QUIC"}, "unknown protocol"},
		{"both key stores", map[string]string{"ssl.keystore.location": ks, "ssl.keystore.key": "x", "ssl.keystore.certificate.chain": "y"}, "both set"},
		{"half inline", map[string]string{"ssl.keystore.key": string(p.KeyPEM)}, "go together"},
		{"missing file", map[string]string{"ssl.keystore.location": dir + "/nope.pem"}, "no such file"},
		{"mismatched key", map[string]string{"ssl.keystore.location": mismatched}, "private key does not match"},
		{"no cert", map[string]string{"ssl.keystore.location": keyOnly}, "no certificate"},
		{"empty trust", map[string]string{"ssl.truststore.certificates": "junk"}, "no certificate"},
		{"endpoint alg", map[string]string{"ssl.endpoint.identification.algorithm": "dns"}, "https or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlsconf.New(tc.cfg, discard())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	st, err := tlsconf.New(map[string]string{}, discard())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ServerConfig(); !errors.Is(err, tlsconf.ErrNoKeyStore) {
		t.Fatalf("ServerConfig without key store: %v", err)
	}
}

// encryptPKCS8 writes der as an encrypted PKCS#8 key (PBES2, PBKDF2-HMAC-SHA256,
// AES-256-CBC), as openssl pkcs8 -topk8 -v2 aes256 does.
func encryptPKCS8(t *testing.T, der []byte, password string) []byte {
	salt, iv := make([]byte, 16), make([]byte, 16)
	rand.Read(salt)
	rand.Read(iv)
	key, err := pbkdf2.Key(sha256.New, password, salt, 2048, 32)
	if err != nil {
		t.Fatal(err)
	}
	pad := 16 - len(der)%16
	plain := append(append([]byte{}, der...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	blk, _ := aes.NewCipher(key)
	ct := make([]byte, len(plain))
	cipher.NewCBCEncrypter(blk, iv).CryptBlocks(ct, plain)
	mustMarshal := func(v any) asn1.RawValue {
		b, err := asn1.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return asn1.RawValue{FullBytes: b}
	}
	type kdfParams struct {
		Salt []byte
		Iter int
		PRF  pkix.AlgorithmIdentifier
	}
	kdf := pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12},
		Parameters: mustMarshal(kdfParams{salt, 2048, pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}, Parameters: asn1.NullRawValue}})}
	enc := pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}, Parameters: mustMarshal(iv)}
	algo := pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13},
		Parameters: mustMarshal(struct{ KDF, Enc pkix.AlgorithmIdentifier }{kdf, enc})}
	out, err := asn1.Marshal(struct {
		Algo pkix.AlgorithmIdentifier
		Data []byte
	}{algo, ct})
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: out})
}

// Inline PEM values that lost their line breaks (a server.properties value written
// with line continuations) are read as Kafka reads them.
func TestInlinePEMOnOneLine(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	p := ca.Server(t, "b")
	oneLine := func(b []byte) string { return strings.ReplaceAll(string(b), "\n", "") }
	key, chain := oneLine(p.KeyPEM), oneLine(p.CertPEM)
	if strings.Contains(key, "\n") || !strings.HasPrefix(key, "-----BEGIN PRIVATE KEY-----MI") {
		t.Fatalf("test value %q", key[:40])
	}
	st, err := tlsconf.New(map[string]string{"ssl.keystore.key": key, "ssl.keystore.certificate.chain": chain,
		"ssl.truststore.certificates": oneLine(ca.PEM)}, discard())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Certificate().Leaf.Equal(p.Cert) || len(st.Certificate().Certificate) != 2 {
		t.Fatal("wrong key pair")
	}
}

func TestEncryptedKey(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	p := ca.Server(t, "b")
	der, err := x509.MarshalPKCS8PrivateKey(p.Key)
	if err != nil {
		t.Fatal(err)
	}
	encKey := string(encryptPKCS8(t, der, "s3cret"))
	cfg := func(pw string) map[string]string {
		return map[string]string{"ssl.keystore.key": encKey, "ssl.keystore.certificate.chain": string(p.CertPEM), "ssl.key.password": pw}
	}
	st, err := tlsconf.New(cfg("s3cret"), discard())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Certificate().Leaf.Equal(p.Cert) {
		t.Fatal("wrong certificate")
	}
	for _, pw := range []string{"", "wrong"} {
		if _, err := tlsconf.New(cfg(pw), discard()); !errors.Is(err, tlsconf.ErrKeyPassword) {
			t.Fatalf("password %q: %v", pw, err)
		}
	}
	legacy := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00"}, Bytes: []byte{1}})
	if _, err := tlsconf.New(map[string]string{"ssl.keystore.key": string(legacy), "ssl.keystore.certificate.chain": string(p.CertPEM)}, discard()); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Fatalf("legacy key: %v", err)
	}
}

func TestReloadOnFileChange(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	dir := t.TempDir()
	ks := tlstest.WriteFile(t, dir, "server.pem", first.KeyStore())
	var logs bytes.Buffer
	st, err := tlsconf.New(map[string]string{"ssl.keystore.location": ks}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := st.ServerConfig()
	leaf := func() string {
		t.Helper()
		var got string
		cli := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", VerifyConnection: func(cs tls.ConnectionState) error {
			got = cs.PeerCertificates[0].Subject.CommonName
			return nil
		}}
		if _, serr, cerr := handshake(t, srv, cli); serr != nil || cerr != nil {
			t.Fatalf("handshake: %v %v", serr, cerr)
		}
		return got
	}
	if got := leaf(); got != "first" {
		t.Fatalf("leaf %q", got)
	}
	// A broken file keeps the old certificate and warns.
	tlstest.Replace(t, ks, []byte("-----BEGIN GARBAGE-----\n"))
	waitFor(t, 5*time.Second, func() bool { leaf(); return strings.Contains(logs.String(), "reload failed") })
	if got := leaf(); got != "first" {
		t.Fatalf("after a broken file: leaf %q", got)
	}
	tlstest.Replace(t, ks, second.KeyStore())
	waitFor(t, 5*time.Second, func() bool { return leaf() == "second" })
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSubjectDN(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	for _, tc := range []struct {
		name string
		subj pkix.Name
		want string
	}{
		{"fields", pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme"}, Country: []string{"US"}},
			"CN=alice,OU=eng,O=Acme,C=US"},
		{"escapes", pkix.Name{CommonName: "Kafka, Server+1", Organization: []string{" lead#"}},
			`CN=Kafka\, Server\+1,O=\ lead#`},
		{"email and dc", pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "com"},
			{Type: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}, Value: "a@b"},
			{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "bob"},
		}}, "CN=bob,1.2.840.113549.1.9.1=#0c03614062,DC=com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ca.Client(t, tc.subj)
			got, err := tlsconf.SubjectDN(c.Cert)
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := tlsconf.FormatDN([]byte{0x30, 0x05}); err == nil {
		t.Fatal("truncated name accepted")
	}
}
