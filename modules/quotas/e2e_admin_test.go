package quotas_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/testbroker"
)

func name(s string) *string { return &s }

func entity(kv ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(kv); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: kv[i]}
		if kv[i+1] != "<default>" {
			c.Name = name(kv[i+1])
		}
		e = append(e, c)
	}
	return e
}

func set(key string, v float64) kadm.AlterClientQuotaOp {
	return kadm.AlterClientQuotaOp{Key: key, Value: v}
}

// alter applies entries and returns each entity's error (nil when it applied).
func alter(t *testing.T, adm *kadm.Client, validate bool, entries ...kadm.AlterClientQuotaEntry) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := adm.AlterClientQuotas
	if validate {
		f = adm.ValidateAlterClientQuotas
	}
	res, err := f(ctx, entries)
	if err != nil {
		t.Fatalf("AlterClientQuotas: %v", err)
	}
	if len(res) != len(entries) {
		t.Fatalf("AlterClientQuotas: %d results for %d entries", len(res), len(entries))
	}
	out := make([]error, len(res))
	for i, r := range res {
		out[i] = r.Err
	}
	return out
}

// describe returns the described quotas as sorted "entity: k=v,..." lines.
func describe(t *testing.T, adm *kadm.Client, strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeClientQuotas(ctx, strict, comps)
	if err != nil {
		t.Fatalf("DescribeClientQuotas: %v", err)
	}
	var out []string
	for _, d := range ds {
		var vs []string
		for _, v := range d.Values {
			vs = append(vs, fmt.Sprintf("%s=%g", v.Key, v.Value))
		}
		slices.Sort(vs)
		comps := make([]string, 0, len(d.Entity))
		for _, c := range d.Entity {
			comps = append(comps, c.String())
		}
		slices.Sort(comps)
		out = append(out, strings.Join(comps, ",")+": "+strings.Join(vs, ","))
	}
	slices.Sort(out)
	return out
}

// TestClientQuotasAdmin: AlterClientQuotas and DescribeClientQuotas through kadm:
// entities of every shape, Kafka's validation, validate_only, removal, the filters and
// their match types, and quotas surviving a restart.
func TestClientQuotasAdmin(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)

	errs := alter(t, adm, false,
		kadm.AlterClientQuotaEntry{Entity: entity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1024), set("request_percentage", 25.5)}},
		kadm.AlterClientQuotaEntry{Entity: entity("user", "alice", "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 4096)}},
		kadm.AlterClientQuotaEntry{Entity: entity("user", "<default>"), Ops: []kadm.AlterClientQuotaOp{set("controller_mutation_rate", 10)}},
		kadm.AlterClientQuotaEntry{Entity: entity("client-id", "<default>"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 2048)}},
		kadm.AlterClientQuotaEntry{Entity: entity("ip", "10.1.2.3"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 5)}},
		// Refused, each alone: the others of the request still apply.
		kadm.AlterClientQuotaEntry{Entity: entity("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("no_such_quota", 1)}},
		kadm.AlterClientQuotaEntry{Entity: entity("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1.5)}},
		kadm.AlterClientQuotaEntry{Entity: entity("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", -1)}},
		kadm.AlterClientQuotaEntry{Entity: entity("ip", "10.1.2.3", "user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 1)}},
		kadm.AlterClientQuotaEntry{Entity: entity("ip", "10.1.2.3"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		kadm.AlterClientQuotaEntry{Entity: entity("group", "x"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
	)
	for i, err := range errs {
		want := i >= 5
		if (err != nil) != want {
			t.Errorf("entry %d: error %v", i, err)
		}
		if want && !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("entry %d: %v, want INVALID_REQUEST", i, err)
		}
	}
	// validate_only changes nothing.
	if errs := alter(t, adm, true, kadm.AlterClientQuotaEntry{Entity: entity("user", "carol"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}}); errs[0] != nil {
		t.Fatalf("validate only: %v", errs[0])
	}

	all := []string{
		"client-id=<default>: producer_byte_rate=2048",
		"client-id=app,user=alice: consumer_byte_rate=4096",
		"ip=10.1.2.3: connection_creation_rate=5",
		"user=<default>: controller_mutation_rate=10",
		"user=alice: producer_byte_rate=1024,request_percentage=25.5",
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}
	check("everything", describe(t, adm, false), all)
	check("user alice, not strict", describe(t, adm, false, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: name("alice")}),
		[]string{all[1], all[4]})
	check("user alice, strict", describe(t, adm, true, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: name("alice")}),
		[]string{all[4]})
	check("default user", describe(t, adm, false, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}),
		[]string{all[3]})
	check("any user, strict", describe(t, adm, true, kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 2}),
		[]string{all[3], all[4]})
	check("any user and client id", describe(t, adm, true,
		kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 2}, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 2}),
		[]string{all[1]})

	// Removing the last quota of an entity removes it; a restart keeps the rest.
	errs = alter(t, adm, false, kadm.AlterClientQuotaEntry{Entity: entity("ip", "10.1.2.3"),
		Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Remove: true}}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	want := slices.Delete(slices.Clone(all), 2, 3)
	check("after removing the ip quota", describe(t, adm, false), want)
	b.Restart(t)
	check("after a restart", describe(t, b.Admin(t), false), want)
}
