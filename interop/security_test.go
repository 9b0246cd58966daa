package interop

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// secureEnv is a broker started from the shape of examples/configs/secure.yaml: one
// SASL_SSL listener with PEM files, PLAIN and SCRAM, ACLs with User:admin as the one
// super user and nothing allowed to anyone else until granted.
type secureEnv struct {
	b      *broker
	ca     *tlstest.CA
	caPath string
}

const (
	secAdminPass = "admin-secret"
	secAlicePass = "alice-secret"
	secBobPass   = "bob-secret"
)

func startSecureBroker(t *testing.T) *secureEnv {
	t.Helper()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "sluice-interop-ca")
	server := ca.Server(t, "sluice-broker")
	e := &secureEnv{ca: ca, caPath: tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)}
	keystore := tlstest.WriteFile(t, dir, "server.pem", server.KeyStore())
	e.b = startBrokerConfig(t, fmt.Sprintf(`
listeners: [{name: SASL_SSL, address: 127.0.0.1:0}]
configs:
  ssl.keystore.type: PEM
  ssl.keystore.location: %s
  ssl.truststore.type: PEM
  ssl.truststore.location: %s
  sasl.enabled.mechanisms: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
  super.users: "User:admin"
  allow.everyone.if.no.acl.found: "false"
modules:
  auth: {use: acl, users: [{name: admin, password: %s}]}
`, keystore, e.caPath, secAdminPass))
	return e
}

// client is a kgo client logged in as user over TLS with SCRAM-SHA-512.
func (e *secureEnv) client(t *testing.T, user, pass string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, e.b.addr, append([]kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: e.ca.Pool(), MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()),
	}, opts...)...)
}

// TestSecureClients: the secure broker with every client family. The admin
// (SCRAM-SHA-512, kgo/kadm) creates users with AlterUserScramCredentials and grants
// alice prefixed ACLs; alice produces and consumes with kcat (SCRAM-SHA-256),
// librdkafka (PLAIN and SCRAM-SHA-256, in a group and in transactions) and kafkajs
// (SCRAM-SHA-256, in a group); bob, without ACLs, gets Kafka's authorization codes and
// writes nothing; a wrong password is refused; a plaintext client on the TLS port is
// closed. At the end the admin reads back exactly what alice wrote.
func TestSecureClients(t *testing.T) {
	t.Parallel()
	e := startSecureBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := kadm.NewClient(e.client(t, "admin", secAdminPass))

	// Users: alice and bob, each with both SCRAM mechanisms. Kafka refuses a user named
	// twice in one request (DUPLICATE_RESOURCE), so one request per mechanism.
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		var ups []kadm.UpsertSCRAM
		for user, pass := range map[string]string{"alice": secAlicePass, "bob": secBobPass} {
			ups = append(ups, kadm.UpsertSCRAM{User: user, Mechanism: m, Iterations: 4096, Password: pass})
		}
		altered, err := admin.AlterUserSCRAMs(ctx, nil, ups)
		if err != nil {
			t.Fatalf("AlterUserSCRAMs: %v", err)
		}
		for _, a := range altered {
			if a.Err != nil {
				t.Fatalf("AlterUserSCRAMs %s: %v", a.User, a.Err)
			}
		}
	}
	described, err := admin.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatalf("DescribeUserSCRAMs: %v", err)
	}
	for _, u := range []string{"alice", "bob"} {
		if d, ok := described[u]; !ok || len(d.CredInfos) != 2 {
			t.Fatalf("DescribeUserSCRAMs[%s] = %+v, want two mechanisms", u, described[u])
		}
	}

	// alice may use every topic, group and transactional id starting with "sec-".
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts().
		Topics("sec-").Groups("sec-").TransactionalIDs("sec-").
		ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate)
	created, err := admin.CreateACLs(ctx, acl)
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("CreateACLs: %v", c.Err)
		}
	}
	listed, err := admin.DescribeACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().
		AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny))
	if err != nil {
		t.Fatalf("DescribeACLs: %v", err)
	}
	n := 0
	for _, l := range listed {
		if l.Err != nil {
			t.Fatalf("DescribeACLs: %v", l.Err)
		}
		n += len(l.Described)
	}
	if n != 12 { // 3 resource types x 4 operations
		t.Fatalf("DescribeACLs found %d bindings for alice, want 12", n)
	}
	topic := "sec-data"
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}

	wrote := 0
	t.Run("kcat", func(t *testing.T) {
		kcat := needKcat(t)
		args := e.kcatArgs("alice", secAlicePass, "SCRAM-SHA-256")
		var in strings.Builder
		for i := range 10 {
			fmt.Fprintf(&in, "kcat-%d\n", i)
		}
		run(t, 60*time.Second, in.String(), kcat, append(args, "-P", "-t", topic, "-p", "0")...)
		wrote += 10
		out := run(t, 60*time.Second, "", kcat, append(args, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")...)
		if got := strings.Count(out, "kcat-"); got != 10 {
			t.Fatalf("kcat consumed %d of its 10 records:\n%s", got, out)
		}
		// bob: no ACLs, so the produce fails and nothing is written.
		_, stderr, err := runExit(t, 60*time.Second, "denied\n", kcat, append(e.kcatArgs("bob", secBobPass, "SCRAM-SHA-256"), "-P", "-t", topic, "-p", "0")...)
		if err == nil && !strings.Contains(stderr, "authorization") {
			t.Fatalf("kcat as bob produced without error; stderr:\n%s", stderr)
		}
		if !strings.Contains(strings.ToLower(stderr), "authorization failed") {
			t.Fatalf("kcat as bob: want an authorization failure, stderr:\n%s", stderr)
		}
		// A wrong password is refused.
		_, stderr, err = runExit(t, 60*time.Second, "", kcat, append(e.kcatArgs("alice", "not-her-password", "SCRAM-SHA-256"), "-L", "-m", "10")...)
		if err == nil || !strings.Contains(strings.ToLower(stderr), "authentication") {
			t.Fatalf("kcat with a wrong password: err %v, stderr:\n%s", err, stderr)
		}
	})
	t.Run("librdkafka", func(t *testing.T) {
		needLibrdkafka(t)
		runPythonOK(t, 150*time.Second, "security librdkafka: OK", "security_librdkafka_test.py",
			"allowed", e.b.addr, e.caPath, topic)
		wrote += 20 + 5 // plain records, then one committed transaction (the aborted one is not counted)
		runPythonOK(t, 90*time.Second, "security librdkafka: OK", "security_librdkafka_test.py",
			"denied", e.b.addr, e.caPath, topic)
	})
	t.Run("kafkajs", func(t *testing.T) {
		node := needKafkajs(t)
		var rep struct {
			Produced int `json:"produced"`
			Consumed int `json:"consumed"`
		}
		runNodeReport(t, 120*time.Second, &rep, node, "security_kafkajs_test.js", e.b.addr, e.caPath, topic)
		if rep.Produced != 10 || rep.Consumed < 10 {
			t.Fatalf("kafkajs report %+v, want 10 produced and at least 10 consumed", rep)
		}
		wrote += rep.Produced
	})
	t.Run("kgo denied", func(t *testing.T) {
		bob := e.client(t, "bob", secBobPass, kgo.DefaultProduceTopic(topic), kgo.RecordRetries(1))
		err := bob.ProduceSync(ctx, &kgo.Record{Value: []byte("denied")}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("bob's produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		md, err := kadm.NewClient(bob).Metadata(ctx)
		if err != nil {
			t.Fatalf("bob's metadata: %v", err)
		}
		if _, ok := md.Topics[topic]; ok {
			t.Fatalf("bob's metadata lists %s, which he may not describe", topic)
		}
		res, err := kadm.NewClient(bob).CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").AllowHosts().
			Topics(topic).Operations(kadm.OpWrite))
		if err == nil {
			if len(res) == 0 {
				t.Fatal("bob granting himself: no result")
			}
			err = res[0].Err
		}
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("bob granting himself Write: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("plaintext on TLS port", func(t *testing.T) {
		nc, err := net.DialTimeout("tcp", e.b.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// An ApiVersions v0 request: size, key 18, version 0, correlation 1, no client id.
		if _, err := nc.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		buf := make([]byte, 4096)
		for {
			_, err := nc.Read(buf)
			if err == nil {
				continue // a TLS alert may come first
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("a plaintext client on the TLS port was left hanging")
			}
			break
		}
	})

	// The admin reads back what alice wrote, and nothing of bob's.
	rc := e.client(t, "admin", secAdminPass, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := 0
	deadline := time.Now().Add(30 * time.Second)
	for got < wrote && time.Now().Before(deadline) {
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := rc.PollFetches(fctx)
		fcancel()
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if bytes.Contains(r.Value, []byte("denied")) {
				t.Errorf("a denied produce was stored: %q", r.Value)
			}
		})
	}
	if got != wrote {
		t.Fatalf("admin read %d committed records, the clients wrote %d", got, wrote)
	}
}

// kcatArgs are kcat's flags for a SASL_SSL login.
func (e *secureEnv) kcatArgs(user, pass, mech string) []string {
	return []string{"-b", e.b.addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + mech,
		"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + e.caPath}
}

// runExit runs a command that may fail and returns its output and exit error.
func runExit(t *testing.T, timeout time.Duration, stdin, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { killGroup(cmd.Process.Pid); return cmd.Process.Kill() }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("%s %s: timed out after %s\nstderr:\n%s", name, strings.Join(args, " "), timeout, tail(stderr.String(), 50))
	}
	return stdout.String(), stderr.String(), err
}

// TestFranzSCRAMSuite runs franz-go's own SCRAM tests (pkg/kgo TestSCRAMAuth and
// TestSCRAMAuthBadCredentials, from the module cache) against a broker with a PLAINTEXT
// listener for their setup and a SASL_PLAINTEXT one for the logins.
func TestFranzSCRAMSuite(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		need(t, "the go command is not on PATH")
	}
	saslAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	b := startBrokerConfig(t, fmt.Sprintf(`
listeners:
  - {name: PLAINTEXT, address: 127.0.0.1:0}
  - {name: SASL_PLAINTEXT, address: %s}
configs:
  sasl.enabled.mechanisms: "SCRAM-SHA-256,SCRAM-SHA-512"
  super.users: "User:admin;User:ANONYMOUS"
modules:
  auth: {use: acl, users: [{name: admin, password: %s}]}
`, saslAddr, secAdminPass))
	out := runCmd(t, runOpts{timeout: 5 * time.Minute, env: []string{
		"KGO_SEEDS=" + b.addr, "KGO_TEST_SCRAM=admin:" + secAdminPass, "KGO_TEST_SCRAM_SEEDS=" + saslAddr,
	}}, goBin, "test", "-count=1", "-run", "^TestSCRAMAuth", "-v", "github.com/twmb/franz-go/pkg/kgo")
	t.Logf("franz-go's SCRAM tests:\n%s", tail(out, 20))
	for _, name := range []string{"TestSCRAMAuth", "TestSCRAMAuthBadCredentials"} {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass", name)
		}
	}
}

// TestSecureMTLSKgo: an SSL listener with ssl.client.auth=required and ACLs, the
// principal taken from the client certificate and mapped by ssl.principal.mapping.rules.
// The admin's certificate (CN=admin, a super user) grants carol prefixed ACLs; carol
// (CN=carol) runs a kgo transaction and reads it back in a consumer group,
// read_committed; her produce to a topic she holds no ACL for is refused, and a client
// without a certificate does not get in.
func TestSecureMTLSKgo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "sluice-interop-ca")
	keystore := tlstest.WriteFile(t, dir, "server.pem", ca.Server(t, "sluice-broker").KeyStore())
	caPath := tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)
	b := startBrokerConfig(t, fmt.Sprintf(`
listeners: [{name: SSL, address: 127.0.0.1:0}]
configs:
  ssl.keystore.location: %s
  ssl.truststore.location: %s
  ssl.client.auth: required
  ssl.principal.mapping.rules: "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
  super.users: "User:admin"
modules:
  auth: {use: acl}
`, keystore, caPath))
	client := func(cn string, opts ...kgo.Opt) *kgo.Client {
		cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		if cn != "" {
			cfg.Certificates = []tls.Certificate{ca.Client(t, pkix.Name{CommonName: cn, OrganizationalUnit: []string{"apps"}, Organization: []string{"Acme"}}).TLS(t)}
		}
		return newClient(t, b.addr, append([]kgo.Opt{kgo.DialTLSConfig(cfg)}, opts...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := kadm.NewClient(client("admin"))
	res, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:carol").AllowHosts().
		Topics("mtls-").Groups("mtls-").TransactionalIDs("mtls-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe))
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs: %v", r.Err)
		}
	}
	const topic = "mtls-data"
	if _, err := admin.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "other-data"); err != nil {
		t.Fatalf("CreateTopic other-data: %v", err)
	}

	producer := client("carol", kgo.TransactionalID("mtls-txn"), kgo.DefaultProduceTopic(topic))
	if err := producer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "carol-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("carol's transactional produce: %v", err)
		}
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}

	consumer := client("carol", kgo.ConsumeTopics(topic), kgo.ConsumerGroup("mtls-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	got := 0
	for deadline := time.Now().Add(30 * time.Second); got < 10 && time.Now().Before(deadline); {
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := consumer.PollFetches(fctx)
		fcancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("carol's group consume: %v", e.Err)
			}
		}
		got += fs.NumRecords()
	}
	if got != 10 {
		t.Fatalf("carol consumed %d of her 10 committed records", got)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("carol's commit: %v", err)
	}

	denied := client("carol", kgo.DefaultProduceTopic("other-data"), kgo.RecordRetries(1))
	if err := denied.ProduceSync(ctx, &kgo.Record{Value: []byte("denied")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("carol's produce to other-data: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	anon := client("", kgo.RequestRetries(0), kgo.RetryTimeout(5*time.Second))
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if err := anon.Ping(pctx); err == nil {
		t.Fatal("a client without a certificate got in (ssl.client.auth=required)")
	}
}
