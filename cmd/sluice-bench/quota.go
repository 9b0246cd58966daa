package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// quotaConfig is the quota command: set client quotas (AlterClientQuotas) for a run.
type quotaConfig struct {
	common
	entities []kadm.ClientQuotaEntity // --entity, in order
	ops      []kadm.AlterClientQuotaOp
	count    int // synthetic client ids (other-client-0, ...) given the same quotas
	batch    int
}

// otherClient is the client id of the i-th synthetic entity of --count.
func otherClient(i int) string { return fmt.Sprintf("other-client-%d", i) }

// parseQuotaEntity parses TYPE=NAME[,TYPE=NAME], NAME "<default>" for the default
// entity of its type, e.g. user=alice,client-id=<default>.
func parseQuotaEntity(s string) (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		typ, name, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch typ {
		case "user", "client-id", "ip":
		default:
			return nil, fmt.Errorf("entity %q: want TYPE=NAME[,TYPE=NAME] with TYPE user, client-id or ip", s)
		}
		if !ok || name == "" || seen[typ] {
			return nil, fmt.Errorf("entity %q: want TYPE=NAME[,TYPE=NAME] (each type once, NAME or <default>)", s)
		}
		seen[typ] = true
		c := kadm.ClientQuotaEntityComponent{Type: typ}
		if name != "<default>" {
			c.Name = &name
		}
		e = append(e, c)
	}
	return e, nil
}

func parseQuota(args []string, stderr io.Writer) (*quotaConfig, error) {
	c := &quotaConfig{}
	fs := newFlagSet("quota", stderr)
	brokers := c.common.register(fs)
	fs.Func("entity", "`TYPE=NAME[,TYPE=NAME]`: an entity to give the --set quotas: user, client-id or ip, NAME <default> for the default (repeatable)", func(s string) error {
		e, err := parseQuotaEntity(s)
		if err == nil {
			c.entities = append(c.entities, e)
		}
		return err
	})
	fs.Func("set", "`KEY=VALUE`: a quota to set on every entity, e.g. producer_byte_rate=2000000 (repeatable)", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || k == "" || err != nil {
			return fmt.Errorf("want KEY=VALUE with a number VALUE, got %q", s)
		}
		c.ops = append(c.ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
		return nil
	})
	fs.IntVar(&c.count, "count", 0, "also give the --set quotas to this many other client ids (client-id=other-client-0, other-client-1, ...)")
	fs.IntVar(&c.batch, "batch", 100, "entities per AlterClientQuotas request (Sluice takes up to 1000)")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if err := c.common.finish(fs, *brokers); err != nil {
		return nil, err
	}
	if len(c.ops) == 0 {
		return nil, usageErr("nothing to set: give --set KEY=VALUE")
	}
	if c.count < 0 || c.count > 1_000_000 {
		return nil, usageErr("--count %d: want 0-1000000", c.count)
	}
	if len(c.entities) == 0 && c.count == 0 {
		return nil, usageErr("no entity: give --entity or --count")
	}
	if c.batch < 1 || c.batch > 10_000 {
		return nil, usageErr("--batch %d: want 1-10000", c.batch)
	}
	return c, nil
}

// runQuota sets the quotas, then describes every client quota on the broker and checks
// that each entity set has the values asked; the result's records are the entities set.
func runQuota(ctx context.Context, c *quotaConfig, stderr io.Writer) (*result, error) {
	cl, err := kgo.NewClient(append(c.clientOpts(), kgo.RequestTimeoutOverhead(2*time.Minute))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	all := append([]kadm.ClientQuotaEntity(nil), c.entities...)
	for i := range c.count {
		name := otherClient(i)
		all = append(all, kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}})
	}
	res := &result{Tool: "sluice-bench", Mode: "quota", Brokers: brokersString(c.brokers), Topic: "-", Config: c.configMap()}
	ents := make([]string, len(c.entities))
	for i, e := range c.entities {
		ents[i] = e.String()
	}
	sets := make([]string, len(c.ops))
	for i, o := range c.ops {
		sets[i] = fmt.Sprintf("%s=%v", o.Key, o.Value)
	}
	res.Config["entities"] = ents
	res.Config["set"] = sets
	res.Config["count"] = c.count
	fail := func(msg string) {
		res.Errors++
		if res.FirstError == "" {
			res.FirstError = msg
		}
	}

	refused := map[string]bool{}
	start := time.Now()
	for lo := 0; lo < len(all); lo += c.batch {
		hi := min(len(all), lo+c.batch)
		entries := make([]kadm.AlterClientQuotaEntry, 0, hi-lo)
		for _, e := range all[lo:hi] {
			entries = append(entries, kadm.AlterClientQuotaEntry{Entity: e, Ops: c.ops})
		}
		out, err := adm.AlterClientQuotas(ctx, entries)
		if err != nil {
			return nil, fmt.Errorf("alter client quotas: %w", err)
		}
		for _, a := range out {
			if a.Err != nil {
				msg := a.Err.Error()
				if ke := (*kerr.Error)(nil); errors.As(a.Err, &ke) {
					msg = ke.Message
				}
				fail(fmt.Sprintf("%s: %s: %s", a.Entity, msg, a.ErrMessage))
				refused[entityKey(a.Entity)] = true
				continue
			}
			res.Records++
		}
		if c.progress > 0 && len(all) > c.batch {
			fmt.Fprintf(stderr, "quota: %d of %d\n", hi, len(all))
		}
	}
	res.Seconds = round(time.Since(start).Seconds(), 6)
	if res.Seconds > 0 {
		res.RecordsPerSec = round(float64(res.Records)/res.Seconds, 1)
	}

	// Read them back: every entity set must be described with the values asked.
	described, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		return nil, fmt.Errorf("describe client quotas: %w", err)
	}
	have := make(map[string]map[string]float64, len(described))
	for _, d := range described {
		vs := map[string]float64{}
		for _, v := range d.Values {
			vs[v.Key] = v.Value
		}
		have[entityKey(d.Entity)] = vs
	}
	res.Config["described"] = len(described)
	for _, e := range all {
		if refused[entityKey(e)] {
			continue
		}
		vs, ok := have[entityKey(e)]
		if !ok {
			fail(fmt.Sprintf("%s is not described after it was set", e))
			continue
		}
		for _, o := range c.ops {
			if got, ok := vs[o.Key]; !ok || got != o.Value {
				fail(fmt.Sprintf("%s is described with %s=%v, want %v", e, o.Key, got, o.Value))
			}
		}
	}
	return res, nil
}

// entityKey is an entity's components sorted by type, as one string (the broker may
// describe them in another order than they were set).
func entityKey(e kadm.ClientQuotaEntity) string {
	parts := make([]string, 0, len(e))
	for _, c := range e {
		parts = append(parts, c.String())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
