package auth_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// aclBrokerConfig: auth.acl with the (until SASL lands, anonymous) client a super user.
const aclBrokerConfig = `
configs:
  super.users: "User:ANONYMOUS"
modules:
  auth: {use: acl}
`

func startACLBroker(t testing.TB, cfg string, opts ...testbroker.Option) *testbroker.Broker {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a broker")
	}
	return testbroker.Start(t, append([]testbroker.Option{testbroker.WithConfig(cfg)}, opts...)...)
}

// allACLs is a filter for every binding.
func allACLs() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
		Allow().AllowHosts().Deny().DenyHosts().Operations()
}

// described lists what a DescribeACLs answered, one line per binding, sorted.
func described(t testing.TB, adm *kadm.Client, b *kadm.ACLBuilder) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := adm.DescribeACLs(ctx, b)
	if err != nil {
		t.Fatalf("DescribeACLs: %v", err)
	}
	var out []string
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("DescribeACLs: %v (%s)", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			out = append(out, fmt.Sprintf("%s %s %s %s %s %s %s", d.Type, d.Pattern, d.Name, d.Principal, d.Host, d.Operation, d.Permission))
		}
	}
	sort.Strings(out)
	return out
}

func createOK(t testing.TB, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("CreateACLs %s %s: %v (%s)", r.Name, r.Principal, r.Err, r.ErrMessage)
		}
	}
}

func equalLines(t testing.TB, what string, got, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\ngot\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestACLsKadm creates, describes and deletes ACLs with kadm over a real socket, and
// checks they survive a restart.
func TestACLsKadm(t *testing.T) {
	b := startACLBroker(t, aclBrokerConfig)
	adm := b.Admin(t)
	createOK(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite))
	createOK(t, adm, kadm.NewACLs().Deny("User:bob").DenyHosts("10.0.0.1").Topics("pay-").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))
	createOK(t, adm, kadm.NewACLs().Allow("User:*").Topics("*").Groups("g").Operations(kadm.OpDescribe))
	// The same binding again is stored once.
	createOK(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead))

	want := []string{
		"TOPIC LITERAL orders User:alice * READ ALLOW",
		"TOPIC LITERAL orders User:alice * WRITE ALLOW",
		"TOPIC PREFIXED pay- User:bob 10.0.0.1 ALL DENY",
		"TOPIC LITERAL * User:* * DESCRIBE ALLOW",
		"GROUP LITERAL g User:* * DESCRIBE ALLOW",
	}
	equalLines(t, "all ACLs", described(t, adm, allACLs()), want)

	// MATCH finds the literal, wildcard and prefixed bindings that apply to a topic.
	match := kadm.NewACLs().Topics("pay-eu").ResourcePatternType(kadm.ACLPatternMatch).
		Allow().AllowHosts().Deny().DenyHosts().Operations()
	equalLines(t, "MATCH pay-eu", described(t, adm, match), []string{
		"TOPIC PREFIXED pay- User:bob 10.0.0.1 ALL DENY",
		"TOPIC LITERAL * User:* * DESCRIBE ALLOW",
	})
	// A principal filter.
	equalLines(t, "alice's", described(t, adm, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
		Allow("User:alice").AllowHosts().Operations()), want[:2])

	b.Restart(t)
	adm = b.Admin(t)
	equalLines(t, "all ACLs after a restart", described(t, adm, allACLs()), want)

	// Delete alice's WRITE: the response lists what was deleted.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dr, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").Allow("User:alice").AllowHosts().Operations(kadm.OpWrite))
	if err != nil {
		t.Fatal(err)
	}
	if len(dr) != 1 || dr[0].Err != nil || len(dr[0].Deleted) != 1 || dr[0].Deleted[0].Operation != kadm.OpWrite || dr[0].Deleted[0].Name != "orders" {
		t.Fatalf("DeleteACLs answered %+v", dr)
	}
	equalLines(t, "after deleting one", described(t, adm, allACLs()), append([]string{want[0]}, want[2:]...))

	// Delete everything.
	dr, err = adm.DeleteACLs(ctx, allACLs())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range dr {
		if r.Err != nil {
			t.Fatalf("DeleteACLs: %v", r.Err)
		}
		n += len(r.Deleted)
	}
	if n != 4 {
		t.Fatalf("deleting everything deleted %d bindings, want 4", n)
	}
	equalLines(t, "after deleting all", described(t, adm, allACLs()), nil)
}

// TestCreateACLsValidation sends creations Kafka refuses, next to a valid one, at every
// version.
func TestCreateACLsValidation(t *testing.T) {
	b := startACLBroker(t, aclBrokerConfig)
	cl := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mk := func(typ kmsg.ACLResourceType, pattern kmsg.ACLResourcePatternType, name, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourcePatternType, c.ResourceName = typ, pattern, name
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
		return c
	}
	topic, lit, allow := kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLPermissionTypeAllow
	cases := []struct {
		c    kmsg.CreateACLsRequestCreation
		want *kerr.Error
		msg  string
	}{
		{mk(topic, lit, "ok", "User:alice", kmsg.ACLOperationRead, allow), nil, ""},
		{mk(kmsg.ACLResourceTypeCluster, lit, "not-the-cluster", "User:alice", kmsg.ACLOperationAlter, allow), kerr.InvalidRequest, "kafka-cluster"},
		{mk(topic, lit, "t", "alice", kmsg.ACLOperationRead, allow), kerr.InvalidRequest, "principal"},
		{mk(topic, lit, "t", "User:alice", kmsg.ACLOperationAny, allow), kerr.InvalidRequest, "operation"},
		{mk(topic, lit, "t", "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAny), kerr.InvalidRequest, "permissionType"},
		{mk(kmsg.ACLResourceTypeAny, lit, "t", "User:alice", kmsg.ACLOperationRead, allow), kerr.InvalidRequest, "resourceType"},
		{mk(topic, kmsg.ACLResourcePatternTypeMatch, "t", "User:alice", kmsg.ACLOperationRead, allow), kerr.InvalidRequest, "patternType"},
		{mk(topic, lit, "", "User:alice", kmsg.ACLOperationRead, allow), kerr.InvalidRequest, "empty"},
	}
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Version = v
		for _, c := range cases {
			if v == 0 && c.c.ResourcePatternType != lit {
				continue // v0 has no pattern type on the wire
			}
			req.Creations = append(req.Creations, c.c)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if len(resp.Results) != len(req.Creations) {
			t.Fatalf("v%d: %d results for %d creations", v, len(resp.Results), len(req.Creations))
		}
		i := 0
		for _, c := range cases {
			if v == 0 && c.c.ResourcePatternType != lit {
				continue
			}
			r := resp.Results[i]
			i++
			err := kerr.ErrorForCode(r.ErrorCode)
			switch {
			case c.want == nil && err != nil:
				t.Errorf("v%d %q: %v", v, c.c.ResourceName, err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("v%d %q: got %v, want %v", v, c.c.ResourceName, err, c.want)
			case c.want != nil && (r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, c.msg)):
				t.Errorf("v%d %q: message %v does not mention %q", v, c.c.ResourceName, r.ErrorMessage, c.msg)
			}
		}
	}
	// Only the valid binding is stored.
	equalLines(t, "stored", described(t, kadm.NewClient(cl), allACLs()), []string{"TOPIC LITERAL ok User:alice * READ ALLOW"})

	// A filter with an unknown element is refused.
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType = kmsg.ACLResourceTypeUnknown
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if dresp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("DescribeAcls with an UNKNOWN resource type: code %d, want INVALID_REQUEST", dresp.ErrorCode)
	}
}

// TestACLsNoSuperUser: without super users the anonymous client may not touch ACLs,
// and nothing is stored.
func TestACLsNoSuperUser(t *testing.T) {
	b := startACLBroker(t, "modules:\n  auth: {use: acl}\n")
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").Clusters().Operations(kadm.OpAll))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateACLs answered %+v, want CLUSTER_AUTHORIZATION_FAILED", rs)
	}
	dr, err := adm.DeleteACLs(ctx, allACLs())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dr {
		if !errors.Is(r.Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("DeleteACLs answered %v, want CLUSTER_AUTHORIZATION_FAILED", r.Err)
		}
	}
	resp, err := kmsg.NewPtrDescribeACLsRequest().RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeAcls: code %d, want CLUSTER_AUTHORIZATION_FAILED", resp.ErrorCode)
	}
	// Nothing was stored: restart with the client as a super user and look.
	b.Stop()
	b2 := startACLBroker(t, aclBrokerConfig, testbroker.WithDataDir(b.DataDir))
	equalLines(t, "stored", described(t, b2.Admin(t), allACLs()), nil)
}

// TestACLStartErrors: bad authorizer configs stop the broker from starting.
func TestACLStartErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts brokers")
	}
	for _, tt := range []struct{ cfg, want string }{
		{"configs:\n  super.users: \"admin\"\nmodules:\n  auth: {use: acl}\n", "super.users"},
		{"configs:\n  super.users: \"User:admin;bob\"\nmodules:\n  auth: {use: acl}\n", "super.users"},
	} {
		err := testbroker.StartError(t, tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("config %q: start error %v, want one naming %s", tt.cfg, err, tt.want)
		}
	}
}

// TestACLAPIsWithoutAuthorizer: auth.none answers the ACL APIs with SECURITY_DISABLED.
func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpRead))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateACLs answered %+v, want SECURITY_DISABLED", rs)
	}
	resp, err := kmsg.NewPtrDescribeACLsRequest().RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls: code %d, want SECURITY_DISABLED", resp.ErrorCode)
	}
}

// createMany creates n literal and prefixed topic ACLs in one kadm call and returns
// how long it took.
func createMany(t testing.TB, b *testbroker.Broker, n int) time.Duration {
	t.Helper()
	adm := kadm.NewClient(b.Client(t, kgo.RequestTimeoutOverhead(5*time.Minute)))
	lits, pres := make([]string, 0, n/2), make([]string, 0, n-n/2)
	for i := range n / 2 {
		lits = append(lits, fmt.Sprintf("topic-%05d", i))
	}
	for i := range n - n/2 {
		pres = append(pres, fmt.Sprintf("prefix-%05d-", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for _, batch := range []struct {
		names   []string
		pattern kadm.ACLPattern
	}{{lits, kadm.ACLPatternLiteral}, {pres, kadm.ACLPatternPrefixed}} {
		rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics(batch.names...).
			ResourcePatternType(batch.pattern).Operations(kadm.OpRead))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("CreateACLs %s: %v", r.Name, r.Err)
			}
		}
	}
	return time.Since(start)
}

// TestCreate10kACLs measures creating 10,000 ACLs through kadm (two requests of 5,000)
// and checks every one is stored.
func TestCreate10kACLs(t *testing.T) {
	b := startACLBroker(t, aclBrokerConfig)
	const n = 10000
	d := createMany(t, b, n)
	t.Logf("created %d ACLs in %v (%.0f/s)", n, d, n/d.Seconds())
	if got := len(described(t, b.Admin(t), allACLs())); got != n {
		t.Fatalf("DescribeAcls lists %d ACLs, want %d", got, n)
	}
}

// TestACLsEnforced: with allow.everyone.if.no.acl.found and no super user, the
// anonymous client may do what no binding covers; the bindings it creates take effect
// as soon as CreateAcls returns: a DENY stops its produce to one topic, and an ALLOW
// for someone else on the cluster takes CreateAcls away from it.
func TestACLsEnforced(t *testing.T) {
	b := startACLBroker(t, "configs:\n  allow.everyone.if.no.acl.found: \"true\"\nmodules:\n  auth: {use: acl}\n")
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, topic := range []string{"open", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	createOK(t, adm, kadm.NewACLs().Deny("User:ANONYMOUS").Topics("secret").Operations(kadm.OpWrite))
	cl := b.Client(t, kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to a topic no ACL covers: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to a denied topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	createOK(t, adm, kadm.NewACLs().Allow("User:admin").Clusters().Operations(kadm.OpAlter))
	rs, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").Clusters().Operations(kadm.OpAll))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateACLs once the cluster has an ACL: %+v, want CLUSTER_AUTHORIZATION_FAILED", rs)
	}
}
