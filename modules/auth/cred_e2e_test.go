package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

// aclConfig is auth.acl with a bootstrap user; connections are ANONYMOUS (no SASL
// listener yet), made a super user so the cluster checks pass.
const aclConfig = `
configs:
  super.users: "User:ANONYMOUS"
  sasl.enabled.mechanisms: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
modules:
  auth: {use: acl, users: [{name: admin, password: admin-secret}]}
`

func authenticator(t *testing.T, b *testbroker.Broker) kernel.Authenticator {
	t.Helper()
	a, ok := b.Kernel.Module("auth").(kernel.Authenticator)
	if !ok {
		t.Fatalf("the auth module %T is not an Authenticator", b.Kernel.Module("auth"))
	}
	return a
}

// login runs franz-go's client mechanism m against the broker's exchange in-process.
func login(t *testing.T, a kernel.Authenticator, m sasl.Mechanism) (kernel.Principal, error) {
	t.Helper()
	ctx := context.Background()
	x, err := a.StartSASL(m.Name(), &kernel.ConnInfo{})
	if err != nil {
		t.Fatal(err)
	}
	sess, msg, err := m.Authenticate(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		reply, done, err := x.Step(ctx, msg)
		if err != nil {
			return kernel.Principal{}, err
		}
		clientDone, next, err := sess.Challenge(reply)
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		if done {
			if !clientDone {
				t.Fatal("server done before the client")
			}
			return x.Principal(), nil
		}
		msg = next
	}
	t.Fatal("no end after 4 round trips")
	return kernel.Principal{}, nil
}

func userCode(t *testing.T, got map[string]error, user string, want error) {
	t.Helper()
	err, ok := got[user]
	if !ok {
		t.Fatalf("no result for %q in %v", user, got)
	}
	if !errors.Is(err, want) && !(want == nil && err == nil) {
		t.Fatalf("user %q: %v, want %v", user, err, want)
	}
}

func altered(rs kadm.AlteredUserSCRAMs) map[string]error {
	out := map[string]error{}
	for u, r := range rs {
		out[u] = r.Err
	}
	return out
}

func describedUsers(rs kadm.DescribedUserSCRAMs) map[string]error {
	out := map[string]error{}
	for u, r := range rs {
		out[u] = r.Err
	}
	return out
}

func TestSCRAMCredentialsKadm(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(aclConfig))
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := authenticator(t, b)

	// Only the bootstrap user at first, with both mechanisms.
	ds, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || len(ds["admin"].CredInfos) != 2 || ds["admin"].CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 4096}) {
		t.Fatalf("described %+v", ds)
	}

	// Create alice (both mechanisms from a password, kadm salts it) and bob.
	rs, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Password: "bob-secret"},
	})
	if err != nil || !rs.Ok() {
		t.Fatalf("alter: %v %+v", err, rs)
	}
	ds, err = adm.DescribeUserSCRAMs(ctx, "alice", "bob")
	if err != nil || !ds.Ok() {
		t.Fatalf("describe: %v %+v", err, ds)
	}
	if got := ds["alice"].CredInfos; len(got) != 1 || got[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 8192}) {
		t.Fatalf("alice: %+v", got)
	}

	// The credentials work: SCRAM with the mechanism created, PLAIN, and the admin
	// API's password check; a wrong password does not.
	if p, err := login(t, a, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()); err != nil || p.String() != "User:alice" {
		t.Fatalf("SCRAM-SHA-512 as alice: %v %v", p, err)
	}
	if _, err := login(t, a, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()); err == nil {
		t.Fatal("SCRAM-SHA-256 as alice, who has no such credential, succeeded")
	}
	if p, err := login(t, a, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()); err != nil || p.String() != "User:alice" {
		t.Fatalf("PLAIN as alice: %v %v", p, err)
	}
	if _, err := login(t, a, plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()); err == nil {
		t.Fatal("PLAIN with a wrong password succeeded")
	}
	if p, ok := a.CheckPassword(ctx, "bob", "bob-secret"); !ok || p.String() != "User:bob" {
		t.Fatalf("CheckPassword(bob) = %v %v", p, ok)
	}
	if p, err := login(t, a, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism()); err != nil || p.String() != "User:admin" {
		t.Fatalf("SCRAM-SHA-256 as the bootstrap admin: %v %v", p, err)
	}

	// Rotate the bootstrap admin's SCRAM-SHA-256 password: the stored one wins.
	rs, err = adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "admin", Mechanism: kadm.ScramSha256, Password: "rotated"}})
	if err != nil || !rs.Ok() {
		t.Fatalf("rotate: %v %+v", err, rs)
	}
	if _, err := login(t, a, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism()); err == nil {
		t.Fatal("the old bootstrap password still works after a rotation")
	}
	if _, err := login(t, a, scram.Auth{User: "admin", Pass: "rotated"}.AsSha256Mechanism()); err != nil {
		t.Fatalf("the rotated password: %v", err)
	}

	// Credentials survive a restart on the same data dir.
	b.Restart(t)
	adm = b.Admin(t)
	a = authenticator(t, b)
	ds, err = adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(ds) != 3 || !ds.Ok() {
		t.Fatalf("after restart: %v %+v", err, ds)
	}
	if _, err := login(t, a, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()); err != nil {
		t.Fatalf("alice after restart: %v", err)
	}
	if _, err := login(t, a, scram.Auth{User: "admin", Pass: "rotated"}.AsSha256Mechanism()); err != nil {
		t.Fatalf("the rotated admin after restart: %v", err)
	}

	// Deleting: bob's credential goes, and he can no longer log in.
	rs, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || !rs.Ok() {
		t.Fatalf("delete: %v %+v", err, rs)
	}
	if _, ok := a.CheckPassword(ctx, "bob", "bob-secret"); ok {
		t.Fatal("a deleted user's password still checks")
	}
	ds, err = adm.DescribeUserSCRAMs(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	userCode(t, describedUsers(ds), "bob", kerr.ResourceNotFound)
}

func TestSCRAMCredentialsErrors(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(aclConfig))
	cl := b.Client(t)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	salt := []byte("0123456789abcdef01234567")
	salted256 := make([]byte, 32)
	salted512 := make([]byte, 64)

	// kadm refuses to send some of these itself, so the raw request.
	alter := func(t *testing.T, req *kmsg.AlterUserSCRAMCredentialsRequest) map[string]error {
		t.Helper()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]error{}
		for _, r := range resp.Results {
			if _, dup := out[r.User]; dup {
				t.Fatalf("two results for %q", r.User)
			}
			out[r.User] = kerr.ErrorForCode(r.ErrorCode)
			if r.ErrorCode != 0 && (r.ErrorMessage == nil || *r.ErrorMessage == "") {
				t.Errorf("user %q: code %d without a message", r.User, r.ErrorCode)
			}
		}
		return out
	}
	ups := func(name string, mech int8, iters int32, salt, salted []byte) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, salt, salted
		return u
	}
	del := func(name string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		return d
	}

	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		ups("ok", 1, 4096, salt, salted256),
		ups("mech0", 0, 4096, salt, salted256),
		ups("mech3", 3, 4096, salt, salted256),
		ups("few", 1, 4095, salt, salted256),
		ups("many", 2, 16385, salt, salted512),
		ups("nosalt", 1, 4096, nil, salted256),
		ups("nopass", 1, 4096, salt, nil),
		ups("shortpass", 2, 4096, salt, salted256),
		ups("", 1, 4096, salt, salted256),
		ups("twice", 1, 4096, salt, salted256),
		ups("twice", 2, 4096, salt, salted512),
		ups("delandup", 1, 4096, salt, salted256),
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{
		del("ghost", 1),
		del("admin", 1), // bootstrap only: nothing stored
		del("delmech", 0),
		del("delandup", 2),
	}
	got := alter(t, req)
	for user, want := range map[string]error{
		"ok":        nil,
		"mech0":     kerr.UnsupportedSaslMechanism,
		"mech3":     kerr.UnsupportedSaslMechanism,
		"few":       kerr.UnacceptableCredential,
		"many":      kerr.UnacceptableCredential,
		"nosalt":    kerr.UnacceptableCredential,
		"nopass":    kerr.UnacceptableCredential,
		"shortpass": kerr.UnacceptableCredential,
		"":          kerr.UnacceptableCredential,
		"twice":     kerr.DuplicateResource,
		"delandup":  kerr.DuplicateResource,
		"ghost":     kerr.ResourceNotFound,
		"admin":     kerr.ResourceNotFound,
		"delmech":   kerr.UnsupportedSaslMechanism,
	} {
		userCode(t, got, user, want)
	}
	if len(got) != 14 {
		t.Fatalf("%d results, want one per distinct user: %v", len(got), got)
	}

	// Only "ok" was written.
	ds, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds["ok"].User != "ok" || ds["admin"].User != "admin" {
		t.Fatalf("described %+v", ds)
	}

	// Through kadm too: deleting what is not there, one user twice.
	rs, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "ghost", Mechanism: kadm.ScramSha512}, {User: "ok", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "ok", Mechanism: kadm.ScramSha512, Password: "x"}, {User: "", Mechanism: kadm.ScramSha256, Password: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	userCode(t, altered(rs), "ghost", kerr.ResourceNotFound)
	userCode(t, altered(rs), "ok", kerr.DuplicateResource)
	userCode(t, altered(rs), "", kerr.UnacceptableCredential)
	rs, err = adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "salted", Mechanism: kadm.ScramSha256, Iterations: 16385, Salt: salt, SaltedPassword: salted256}})
	if err != nil {
		t.Fatal(err)
	}
	userCode(t, altered(rs), "salted", kerr.UnacceptableCredential)

	// Describe: unknown and duplicate names.
	ds, err = adm.DescribeUserSCRAMs(ctx, "ok", "ghost", "admin", "admin")
	if err != nil {
		t.Fatal(err)
	}
	userCode(t, describedUsers(ds), "ok", nil)
	userCode(t, describedUsers(ds), "ghost", kerr.ResourceNotFound)
	userCode(t, describedUsers(ds), "admin", kerr.DuplicateResource)
}

// TestSCRAMCredentialsNeedClusterAccess: without super.users, ANONYMOUS has no ACL:
// Describe fails with a top-level CLUSTER_AUTHORIZATION_FAILED, Alter per user, and
// nothing is written.
func TestSCRAMCredentialsNeedClusterAccess(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(strings.Replace(aclConfig, `super.users: "User:ANONYMOUS"`, `super.users: "User:admin"`, 1)))
	cl := b.Client(t)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := adm.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe: %v", err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = "eve", 1, 4096, []byte("salt"), make([]byte, 32)
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = "admin", 1
	req.Upsertions = append(req.Upsertions, u, u)
	req.Deletions = append(req.Deletions, d)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 2 {
		t.Fatalf("results %+v, want one per distinct user", resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("user %q: code %d", r.User, r.ErrorCode)
		}
	}
	if v := b.Kernel.Module("metadata").(kernel.Metadata).Image().Extension("auth.scram", "SCRAM-SHA-256/eve"); v != nil {
		t.Fatalf("a denied upsertion is in the image: %x", v)
	}
}
