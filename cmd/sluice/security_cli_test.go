package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// secureBroker starts a broker with ACLs and three listeners: SASL_SSL (PLAIN, both
// SCRAMs and OAUTHBEARER against a JWKS file), SSL asking for a client certificate
// (CN=admin maps to User:admin) and PLAINTEXT. It returns the broker and the
// directory holding ca.pem, client.pem, client.key and token (a JWT for User:admin).
func secureBroker(t *testing.T) (*testbroker.Broker, string) {
	t.Helper()
	dir := t.TempDir()
	writePKI(t, dir)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "jwks.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(map[string]any{"sub": "admin", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
listeners:
  - {name: SASL_SSL}
  - {name: SSL, address: 127.0.0.1:0}
  - {name: PLAINTEXT, address: 127.0.0.1:0}
configs:
  ssl.keystore.type: PEM
  ssl.keystore.location: %[1]s/server.pem
  ssl.truststore.type: PEM
  ssl.truststore.location: %[1]s/ca.pem
  ssl.client.auth: requested
  ssl.principal.mapping.rules: "RULE:^CN=([^,]+)$/$1/,DEFAULT"
  sasl.enabled.mechanisms: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
  sasl.oauthbearer.jwks.endpoint.url: "file://%[1]s/jwks.json"
  super.users: "User:admin"
  connection.failed.authentication.delay.ms: "0"
modules:
  auth: {use: acl, users: [{name: admin, password: admin-secret}, {name: alice, password: alice-secret}]}
`, dir)
	return testbroker.Start(t, testbroker.WithConfig(cfg)), dir
}

// The Kafka commands over SASL_SSL with each mechanism, over SSL with a client
// certificate, credentials from flags, a file and the environment, and the messages
// of a refused login, an untrusted certificate, a listener of another protocol and
// an ACL denial.
func TestKafkaCommandsSecure(t *testing.T) {
	for _, v := range []string{envSASLMechanism, envSASLUser, envSASLPassword, envSASLToken, envTLSCA} {
		t.Setenv(v, "")
	}
	b, dir := secureBroker(t)
	saslAddr := b.Addr
	sslAddr := b.Kernel.Addrs()[1].String()
	plainAddr := b.Kernel.Addrs()[2].String()
	ca := filepath.Join(dir, "ca.pem")
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := []string{"--tls-ca", ca, "--user", "admin", "--password-file", pwFile}

	// SCRAM-SHA-512 (the default mechanism): create, produce, consume in a group.
	out := mustCLI(t, saslAddr, append([]string{"topic", "create", "vault", "-p", "2"}, admin...)...)
	wantLines(t, out, "vault", "created")
	var perr bytes.Buffer
	if err := produceRun(append([]string{"vault", "-p", "0", "--brokers", saslAddr}, admin...), strings.NewReader("a\nb\nc\n"), io.Discard, &perr); err != nil ||
		!strings.Contains(perr.String(), "produced 3 records") {
		t.Fatalf("produce: %v %s", err, perr.String())
	}
	out = mustCLI(t, saslAddr, append([]string{"consume", "vault", "-n", "3", "-g", "auditors", "-f", `%v\n`}, admin...)...)
	if out != "a\nb\nc\n" {
		t.Fatalf("consume over SASL_SSL: %q", out)
	}
	out = mustCLI(t, saslAddr, append([]string{"group", "describe", "auditors"}, admin...)...)
	wantLines(t, out, "vault", "LAG")

	// The other mechanisms, and credentials from the environment.
	out = mustCLI(t, saslAddr, "cluster", "info", "--tls-ca", ca, "--sasl-mechanism", "plain", "--user", "admin", "--password", "admin-secret")
	wantLines(t, out, "CONTROLLER")
	t.Setenv(envSASLUser, "admin")
	t.Setenv(envSASLPassword, "admin-secret")
	t.Setenv(envSASLMechanism, "SCRAM-SHA-256")
	t.Setenv(envTLSCA, ca)
	wantLines(t, mustCLI(t, saslAddr, "topic", "list"), "vault")
	for _, v := range []string{envSASLMechanism, envSASLUser, envSASLPassword} {
		t.Setenv(v, "")
	}
	out = mustCLI(t, saslAddr, "consume", "vault", "-n", "1", "-f", `%v\n`, "--sasl-mechanism", "OAUTHBEARER", "--token-file", filepath.Join(dir, "token"))
	if out != "a\n" {
		t.Fatalf("consume as the token's subject: %q", out)
	}

	// Mutual TLS on the SSL listener: the certificate is the principal (User:admin).
	out = mustCLI(t, sslAddr, "topic", "describe", "vault", "--tls-cert", filepath.Join(dir, "client.pem"), "--tls-key", filepath.Join(dir, "client.key"))
	wantLines(t, out, "PARTITIONS  2")
	rc, _, errs := cli(t, sslAddr, "topic", "describe", "vault", "--tls-ca", ca)
	if rc != 1 || !strings.Contains(errs, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("describe over SSL without a certificate (User:ANONYMOUS): exit %d %s", rc, errs)
	}

	// A user without ACLs is denied, by Kafka's error code.
	rc, _, errs = cli(t, saslAddr, "consume", "vault", "-e", "--user", "alice", "--password", "alice-secret")
	if rc != 1 || !strings.Contains(errs, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice consumes: exit %d %s", rc, errs)
	}
	t.Setenv(envTLSCA, "")

	for _, tc := range []struct {
		name string
		addr string
		args []string
		rc   int
		want string
	}{
		{"wrong password", saslAddr, []string{"--tls-ca", ca, "--user", "admin", "--password", "nope"}, 1, "refused the login (SCRAM-SHA-512 as admin)"},
		{"mechanism not enabled", plainAddr, []string{"--user", "admin", "--password", "admin-secret"}, 1, "does not take this login"},
		{"untrusted certificate", saslAddr, []string{"--tls", "--user", "admin", "--password", "admin-secret"}, 1, "give --tls-ca"},
		{"TLS to a plaintext listener", plainAddr, []string{"--tls-ca", ca}, 1, "does not seem to speak TLS"},
		{"plaintext to a TLS listener", saslAddr, nil, 1, "wants --tls"},
		{"unknown mechanism", saslAddr, []string{"--sasl-mechanism", "GSSAPI", "--user", "a", "--password", "b"}, 2, "want SCRAM-SHA-512"},
		{"user without password", saslAddr, []string{"--user", "admin"}, 2, "without a password"},
		{"token without its file", saslAddr, []string{"--sasl-mechanism", "OAUTHBEARER"}, 2, "needs --token-file"},
		{"cert without key", saslAddr, []string{"--tls-cert", "c.pem"}, 2, "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, errs := cli(t, tc.addr, append([]string{"topic", "list", "--timeout", "3s"}, tc.args...)...)
			t.Logf("stderr: %s", errs)
			if rc != tc.rc || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", rc, errs, tc.rc, tc.want)
			}
		})
	}
}
