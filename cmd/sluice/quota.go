package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

const quotaUsage = `usage: sluice quota <command> [flags]

commands:
  describe [ENTITY] [--strict]
                        client quotas and their values: all of them, or those of the
                        entities that have ENTITY's parts (--strict: ENTITY alone)
  set ENTITY KEY=VALUE... [--validate-only]
                        set quotas of one entity (its other quotas stay)
  delete ENTITY KEY... [--validate-only]
  delete ENTITY --all [--validate-only]
                        remove quotas of one entity (--all: every one it has)

` + quotaEntityHelp + `
KEY is one of:
  producer_byte_rate        bytes produced per second (a whole number)
  consumer_byte_rate        bytes fetched per second (a whole number)
  request_percentage        percent of one request-handling thread's time
  controller_mutation_rate  partitions created or deleted per second
  connection_creation_rate  connections opened per second (ip entities only)
Each broker holds every client to its quotas on its own. --validate-only has the
broker check a change without making it. Reading quotas needs DescribeConfigs on
the cluster, changing them AlterConfigs (an ACL, or a super user).

` + kafkaHelp

// quotaEntityHelp says how the entity flags name a quota entity.
const quotaEntityHelp = `ENTITY is a user, a client id, a user and a client id together, or an IP address;
each part is a name or the default (<default>: whoever has no quota of their own):
  --quota-user NAME | --quota-user-default
                        a user (a principal's name; --user is the SASL login)
  --client-id ID | --client-id-default
                        a client id
  --ip ADDRESS | --ip-default
                        a client's IP address (alone, not with a user or client id)
`

func quotaCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice quota", quotaUsage, args, stdout, stderr, []command{
		{[]string{"describe"}, cliRun("sluice quota describe", quotaDescribe)},
		{[]string{"set"}, cliRun("sluice quota set", quotaSet)},
		{[]string{"delete"}, cliRun("sluice quota delete", quotaDelete)},
	})
}

// quotaName is a flag holding a name that remembers whether it was given, so that
// an empty name is told from none.
type quotaName struct {
	name string
	set  bool
}

func (q *quotaName) String() string     { return q.name }
func (q *quotaName) Set(s string) error { q.name, q.set = s, true; return nil }

// quotaEntityFlags name one client quota entity: for each type a name or the
// default.
type quotaEntityFlags struct {
	user, clientID, ip        quotaName
	userDef, clientDef, ipDef bool
}

func (e *quotaEntityFlags) register(fs *flag.FlagSet) {
	fs.Var(&e.user, "quota-user", "the entity's user: a principal's `NAME` (--user is the SASL login)")
	fs.BoolVar(&e.userDef, "quota-user-default", false, "the entity's user is the default user (<default>)")
	fs.Var(&e.clientID, "client-id", "the entity's client `ID`")
	fs.BoolVar(&e.clientDef, "client-id-default", false, "the entity's client id is the default one (<default>)")
	fs.Var(&e.ip, "ip", "the entity's IP `ADDRESS`")
	fs.BoolVar(&e.ipDef, "ip-default", false, "the entity is the default IP address (<default>)")
}

// components returns the entity the flags name, its parts in display order (user,
// client-id, ip); none when no flag was given. A type given both by name and as
// the default, or an empty name, is a usage error.
func (e *quotaEntityFlags) components() ([]kadm.ClientQuotaEntityComponent, error) {
	var out []kadm.ClientQuotaEntityComponent
	for _, p := range []struct {
		typ, flag string
		name      quotaName
		def       bool
	}{
		{"user", "quota-user", e.user, e.userDef},
		{"client-id", "client-id", e.clientID, e.clientDef},
		{"ip", "ip", e.ip, e.ipDef},
	} {
		switch {
		case p.name.set && p.def:
			return nil, usageError{fmt.Sprintf("--%s and --%s-default: give one", p.flag, p.flag)}
		case p.name.set && p.name.name == "":
			return nil, usageError{fmt.Sprintf("--%s: empty name (the default is --%s-default)", p.flag, p.flag)}
		case p.name.set:
			name := p.name.name
			out = append(out, kadm.ClientQuotaEntityComponent{Type: p.typ, Name: &name})
		case p.def:
			out = append(out, kadm.ClientQuotaEntityComponent{Type: p.typ})
		}
	}
	return out, nil
}

// entity is components for the commands that change one entity: at least one part
// is required.
func (e *quotaEntityFlags) entity(kf *kafkaFlags) ([]kadm.ClientQuotaEntityComponent, error) {
	comps, err := e.components()
	if err != nil || len(comps) > 0 {
		return comps, err
	}
	msg := "no entity: give --quota-user NAME or --quota-user-default, --client-id ID or --client-id-default (or both), or --ip ADDRESS or --ip-default"
	if kf.sec.cred.user != "" {
		msg += " (--user is the SASL login, not the quota's user)"
	}
	return nil, usageError{msg}
}

// quotaTypeRank orders an entity's parts for display: user, client-id, ip, others.
func quotaTypeRank(typ string) int {
	switch typ {
	case "user":
		return 0
	case "client-id":
		return 1
	case "ip":
		return 2
	}
	return 3
}

// quotaEntityString prints an entity as "user=alice client-id=<default>".
func quotaEntityString(comps []kadm.ClientQuotaEntityComponent) string {
	sorted := slices.Clone(comps)
	slices.SortStableFunc(sorted, func(a, b kadm.ClientQuotaEntityComponent) int {
		return quotaTypeRank(a.Type) - quotaTypeRank(b.Type)
	})
	parts := make([]string, len(sorted))
	for i, c := range sorted {
		parts[i] = c.String() // type=name, or type=<default>
	}
	return strings.Join(parts, " ")
}

// quotaFilter is the describe filter matching comps exactly (a name, or the
// default).
func quotaFilter(comps []kadm.ClientQuotaEntityComponent) []kadm.DescribeClientQuotaComponent {
	var out []kadm.DescribeClientQuotaComponent
	for _, c := range comps {
		f := kadm.DescribeClientQuotaComponent{Type: c.Type, MatchName: c.Name, MatchType: 0} // exact
		if c.Name == nil {
			f.MatchType = 1 // the default
		}
		out = append(out, f)
	}
	return out
}

// quotaConnect is kf.connect with a reminder, on a usage error about the login
// while --user is given, that --user is the SASL login here too.
func quotaConnect(kf *kafkaFlags, spans int) (context.Context, *adminConn, func(), error) {
	ctx, adm, done, err := kf.connect(spans)
	var ue usageError
	if err != nil && kf.sec.cred.user != "" && errors.As(err, &ue) {
		err = usageError{ue.msg + " (--user is the SASL login; the quota's user is --quota-user)"}
	}
	return ctx, adm, done, err
}

// formatQuota prints a quota value without an exponent or trailing zeros.
func formatQuota(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func quotaDescribe(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" [ENTITY] [--strict]\n\n"+quotaEntityHelp+"Without ENTITY: every entity with quotas.\n", stderr)
	var ef quotaEntityFlags
	ef.register(fs)
	strict := fs.Bool("strict", false, "only ENTITY itself, not the entities that have other parts besides (user=alice, not user=alice client-id=app)")
	if _, err := kf.parse(fs, args, 0, 0, ""); err != nil {
		return err
	}
	comps, err := ef.components()
	if err != nil {
		return err
	}
	if *strict && len(comps) == 0 {
		return usageError{"--strict needs an entity (--quota-user, --client-id, --ip or their -default)"}
	}
	ctx, adm, done, err := quotaConnect(kf, 2)
	if err != nil {
		return err
	}
	defer done()
	described, err := adm.DescribeClientQuotas(ctx, *strict, quotaFilter(comps))
	if err != nil {
		return err
	}
	type part struct {
		Type    string `json:"type"`
		Name    string `json:"name,omitempty"`
		Default bool   `json:"default,omitempty"`
	}
	type entry struct {
		Entity string             `json:"entity"`
		Parts  []part             `json:"parts"`
		Values map[string]float64 `json:"values"`
	}
	out := []entry{}
	for _, d := range described {
		e := entry{Entity: quotaEntityString(d.Entity), Parts: []part{}, Values: map[string]float64{}}
		for _, c := range d.Entity {
			p := part{Type: c.Type, Default: c.Name == nil}
			if c.Name != nil {
				p.Name = *c.Name
			}
			e.Parts = append(e.Parts, p)
		}
		slices.SortStableFunc(e.Parts, func(a, b part) int { return quotaTypeRank(a.Type) - quotaTypeRank(b.Type) })
		for _, v := range d.Values {
			e.Values[v.Key] = v.Value
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.Entity, b.Entity) })
	if kf.json {
		return printJSON(stdout, out)
	}
	t := newTable(stdout, "ENTITY", "KEY", "VALUE")
	for _, e := range out {
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			t.row(e.Entity, k, formatQuota(e.Values[k]))
		}
	}
	t.flush()
	return nil
}

func quotaSet(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" ENTITY KEY=VALUE... [--validate-only]\n\n"+quotaEntityHelp, stderr)
	var ef quotaEntityFlags
	ef.register(fs)
	validate := fs.Bool("validate-only", false, "have the broker check the change without making it")
	pos, err := kf.parse(fs, args, 1, -1, "KEY=VALUE (a quota to set)")
	if err != nil {
		return err
	}
	comps, err := ef.entity(kf)
	if err != nil {
		return err
	}
	var ops []kadm.AlterClientQuotaOp
	seen := map[string]bool{}
	for _, s := range pos {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return usageError{fmt.Sprintf("%q: want KEY=VALUE", s)}
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return usageError{fmt.Sprintf("%s: %q is not a number", k, v)}
		}
		if seen[k] {
			return usageError{k + " given twice"}
		}
		seen[k] = true
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
	}
	ctx, adm, done, err := quotaConnect(kf, 2)
	if err != nil {
		return err
	}
	defer done()
	return alterQuota(ctx, adm, stdout, kf.json, comps, ops, *validate, "set")
}

func quotaDelete(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" ENTITY KEY... [--validate-only]\n       "+prog+" ENTITY --all [--validate-only]\n\n"+quotaEntityHelp, stderr)
	var ef quotaEntityFlags
	ef.register(fs)
	all := fs.Bool("all", false, "remove every quota the entity has")
	validate := fs.Bool("validate-only", false, "have the broker check the change without making it")
	keys, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	comps, err := ef.entity(kf)
	if err != nil {
		return err
	}
	switch {
	case *all && len(keys) > 0:
		return usageError{"give KEYs or --all, not both"}
	case !*all && len(keys) == 0:
		return usageError{"missing KEY (a quota to remove), or --all"}
	}
	for i, k := range keys {
		if strings.Contains(k, "=") {
			return usageError{fmt.Sprintf("%q: delete takes KEY, not KEY=VALUE", k)}
		}
		if slices.Contains(keys[:i], k) {
			return usageError{k + " given twice"}
		}
	}
	ctx, adm, done, err := quotaConnect(kf, 3)
	if err != nil {
		return err
	}
	defer done()
	name := quotaEntityString(comps)
	if *all {
		described, err := adm.DescribeClientQuotas(ctx, true, quotaFilter(comps))
		if err != nil {
			return err
		}
		for _, d := range described {
			if quotaEntityString(d.Entity) != name {
				continue
			}
			for _, v := range d.Values {
				keys = append(keys, v.Key)
			}
		}
		if len(keys) == 0 {
			return printStatuses(stdout, kf.json, "ENTITY", "no quotas to delete", []string{name}, func(string) error { return nil }, "")
		}
		slices.Sort(keys)
	}
	ops := make([]kadm.AlterClientQuotaOp, len(keys))
	for i, k := range keys {
		ops[i] = kadm.AlterClientQuotaOp{Key: k, Remove: true}
	}
	return alterQuota(ctx, adm, stdout, kf.json, comps, ops, *validate, "deleted "+strings.Join(keys, ","))
}

// alterQuota sends ops for the entity comps (only to be checked, with validate) and
// prints its status: done, or the broker's error for it (exit 1).
func alterQuota(ctx context.Context, adm *adminConn, stdout io.Writer, asJSON bool, comps []kadm.ClientQuotaEntityComponent,
	ops []kadm.AlterClientQuotaOp, validate bool, done string) error {
	alter := adm.AlterClientQuotas
	if validate {
		alter = adm.ValidateAlterClientQuotas
		done = "valid (--validate-only: nothing changed)"
	}
	res, err := alter(ctx, []kadm.AlterClientQuotaEntry{{Entity: comps, Ops: ops}})
	if err != nil {
		return err
	}
	return printStatuses(stdout, asJSON, "ENTITY", done, []string{quotaEntityString(comps)}, func(string) error {
		if len(res) != 1 {
			return errors.New("no answer for this entity")
		}
		if res[0].Err != nil {
			return errors.New(errWithMessage(res[0].Err, res[0].ErrMessage))
		}
		return nil
	}, "quota changes")
}
