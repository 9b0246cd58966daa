package main

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// The quota commands against a real broker: set, describe (all, filtered, strict,
// JSON), validate-only, delete by key and --all, default entities, and the broker's
// refusals shown per entity with exit 1.
func TestQuotaCommands(t *testing.T) {
	b := testbroker.Start(t)
	addr := b.Addr
	const empty = "ENTITY  KEY  VALUE\n"
	if out := mustCLI(t, addr, "quota", "describe"); out != empty {
		t.Fatalf("describe before any quota:\n%q", out)
	}

	// set: flags after the values, named and default entities.
	out := mustCLI(t, addr, "quota", "set", "producer_byte_rate=1048576", "request_percentage=25.5", "--quota-user", "alice")
	if want := "ENTITY      STATUS\nuser=alice  set\n"; out != want {
		t.Fatalf("set:\n%q\nwant\n%q", out, want)
	}
	mustCLI(t, addr, "quota", "set", "--quota-user", "alice", "--client-id-default", "consumer_byte_rate=2048")
	mustCLI(t, addr, "quotas", "set", "--quota-user-default", "controller_mutation_rate=10")
	mustCLI(t, addr, "quota", "set", "--client-id", "app", "producer_byte_rate=4096")
	mustCLI(t, addr, "quota", "set", "--ip-default", "connection_creation_rate=50")

	// Every entity, sorted, each value on its row sorted by key; the user comes
	// before the client id whatever order the broker keeps them in.
	want := "" +
		"ENTITY                          KEY                       VALUE\n" +
		"client-id=app                   producer_byte_rate        4096\n" +
		"ip=<default>                    connection_creation_rate  50\n" +
		"user=<default>                  controller_mutation_rate  10\n" +
		"user=alice                      producer_byte_rate        1048576\n" +
		"user=alice                      request_percentage        25.5\n" +
		"user=alice client-id=<default>  consumer_byte_rate        2048\n"
	if out := mustCLI(t, addr, "quota", "describe"); out != want {
		t.Fatalf("describe:\n%s\nwant\n%s", out, want)
	}

	// Filters: an entity's parts match every entity that has them, --strict only it.
	describe := func(args ...string) []string {
		t.Helper()
		var rows []string
		for _, l := range strings.Split(mustCLI(t, addr, append([]string{"quota", "describe"}, args...)...), "\n")[1:] {
			if l != "" {
				rows = append(rows, strings.Join(strings.Fields(l), " "))
			}
		}
		return rows
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"user", []string{"--quota-user", "alice"}, []string{
			"user=alice producer_byte_rate 1048576", "user=alice request_percentage 25.5", "user=alice client-id=<default> consumer_byte_rate 2048"}},
		{"user strict", []string{"--quota-user", "alice", "--strict"}, []string{
			"user=alice producer_byte_rate 1048576", "user=alice request_percentage 25.5"}},
		{"default client id", []string{"--client-id-default"}, []string{"user=alice client-id=<default> consumer_byte_rate 2048"}},
		{"default client id strict", []string{"--client-id-default", "--strict"}, nil},
		{"default user", []string{"--quota-user-default"}, []string{"user=<default> controller_mutation_rate 10"}},
		{"user and client id", []string{"--quota-user", "alice", "--client-id-default"}, []string{"user=alice client-id=<default> consumer_byte_rate 2048"}},
		{"unknown user", []string{"--quota-user", "nobody"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(tc.args...); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}

	// JSON: the entity's parts (a default is marked, not named) and its values.
	type jsonEntry struct {
		Entity string `json:"entity"`
		Parts  []struct {
			Type    string `json:"type"`
			Name    string `json:"name"`
			Default bool   `json:"default"`
		} `json:"parts"`
		Values map[string]float64 `json:"values"`
	}
	var entries []jsonEntry
	raw := mustCLI(t, addr, "quota", "describe", "--quota-user", "alice", "--json")
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		t.Fatal(err)
	}
	wantLines(t, raw, `"entity": "user=alice client-id=<default>"`) // not \u003cdefault\u003e
	if len(entries) != 2 || entries[0].Entity != "user=alice" || entries[0].Values["request_percentage"] != 25.5 ||
		entries[0].Values["producer_byte_rate"] != 1048576 || len(entries[0].Values) != 2 ||
		len(entries[1].Parts) != 2 || entries[1].Parts[0].Name != "alice" || entries[1].Parts[1].Type != "client-id" ||
		!entries[1].Parts[1].Default || entries[1].Parts[1].Name != "" {
		t.Fatalf("describe --json: %+v", entries)
	}

	// --validate-only: the broker checks, nothing changes.
	out = mustCLI(t, addr, "quota", "set", "--quota-user", "carol", "producer_byte_rate=1", "--validate-only")
	wantLines(t, out, "user=carol", "valid (--validate-only: nothing changed)")
	if got := describe("--quota-user", "carol"); got != nil {
		t.Fatalf("a validate-only set applied: %q", got)
	}
	mustCLI(t, addr, "quota", "delete", "--quota-user", "alice", "--all", "--validate-only")
	if got := describe("--quota-user", "alice", "--strict"); len(got) != 2 {
		t.Fatalf("a validate-only delete --all applied: %q", got)
	}

	// The broker's refusals: per entity, with its code and message, exit 1.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--quota-user", "bob", "no_such_quota=1"}, "INVALID_REQUEST"},
		{"fraction of a byte rate", []string{"--quota-user", "bob", "producer_byte_rate=1.5"}, "INVALID_REQUEST"},
		{"negative", []string{"--client-id", "app", "consumer_byte_rate=-5"}, "INVALID_REQUEST"},
		{"ip with a user", []string{"--ip", "10.0.0.1", "--quota-user", "bob", "connection_creation_rate=1"}, "ip combined with user or client-id"},
		{"not an address", []string{"--ip", "host", "connection_creation_rate=1"}, "not an IP address"},
		{"validate-only still checks", []string{"--quota-user", "bob", "no_such_quota=1", "--validate-only"}, "INVALID_REQUEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, out, errs := cli(t, addr, append([]string{"quota", "set"}, tc.args...)...)
			if rc != 1 || !strings.Contains(out, tc.want) || !strings.Contains(errs, "sluice quota set: 1 quota changes failed") {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s\nwant exit 1 and %q", rc, out, errs, tc.want)
			}
		})
	}
	rc, out, _ := cli(t, addr, "quota", "set", "--quota-user", "bob", "no_such_quota=1", "--json")
	var statuses []struct{ Name, Error string }
	if err := json.Unmarshal([]byte(out), &statuses); rc != 1 || err != nil || len(statuses) != 1 ||
		statuses[0].Name != "user=bob" || !strings.Contains(statuses[0].Error, "INVALID_REQUEST") || !strings.Contains(statuses[0].Error, "no_such_quota") {
		t.Fatalf("set --json of an unknown key: exit %d %v %s", rc, err, out)
	}
	if got := describe("--quota-user", "bob"); got != nil {
		t.Fatalf("refused sets applied: %q", got)
	}

	// delete: one key, then --all, then the defaults; describe is empty again.
	wantLines(t, mustCLI(t, addr, "quota", "delete", "--quota-user", "alice", "request_percentage"), "user=alice  deleted request_percentage")
	if got := describe("--quota-user", "alice", "--strict"); strings.Join(got, "|") != "user=alice producer_byte_rate 1048576" {
		t.Fatalf("after deleting request_percentage: %q", got)
	}
	wantLines(t, mustCLI(t, addr, "quota", "delete", "--quota-user", "alice", "--client-id-default", "--all"),
		"user=alice client-id=<default>  deleted consumer_byte_rate")
	wantLines(t, mustCLI(t, addr, "quota", "delete", "--all", "--quota-user", "alice"), "deleted producer_byte_rate")
	wantLines(t, mustCLI(t, addr, "quota", "delete", "--all", "--quota-user", "alice"), "user=alice  no quotas to delete")
	mustCLI(t, addr, "quota", "delete", "--quota-user-default", "controller_mutation_rate")
	mustCLI(t, addr, "quota", "delete", "--client-id", "app", "producer_byte_rate")
	mustCLI(t, addr, "quota", "delete", "--ip-default", "--all")
	if out := mustCLI(t, addr, "quota", "describe"); out != empty {
		t.Fatalf("describe after deleting every quota:\n%s", out)
	}
	if out := mustCLI(t, addr, "quota", "describe", "--json"); out != "[]\n" {
		t.Fatalf("describe --json with no quotas: %q", out)
	}
}

// Without the rights, the broker refuses: describe fails whole, set per entity.
func TestQuotaCommandsDenied(t *testing.T) {
	for _, v := range []string{envSASLMechanism, envSASLUser, envSASLPassword, envSASLToken, envTLSCA} {
		t.Setenv(v, "")
	}
	b, _ := secureBroker(t)
	plainAddr := b.Kernel.Addrs()[2].String() // User:ANONYMOUS, no ACLs
	rc, _, errs := cli(t, plainAddr, "quota", "describe")
	if rc != 1 || !strings.Contains(errs, "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("describe without DescribeConfigs: exit %d %s", rc, errs)
	}
	rc, out, errs := cli(t, plainAddr, "quota", "set", "--quota-user", "alice", "producer_byte_rate=1")
	if rc != 1 || !strings.Contains(out, "user=alice  CLUSTER_AUTHORIZATION_FAILED") || !strings.Contains(errs, "1 quota changes failed") {
		t.Fatalf("set without AlterConfigs: exit %d\n%s%s", rc, out, errs)
	}
}

// Wrong usage exits 2 before any broker is dialled; an unreachable broker exits 1.
func TestQuotaCommandErrors(t *testing.T) {
	t.Setenv(envSASLUser, "")
	t.Setenv(envSASLPassword, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name string
		args []string
		rc   int
		want string
	}{
		{"no subcommand", []string{"quota"}, 2, "usage: sluice quota <command>"},
		{"unknown subcommand", []string{"quota", "list-all"}, 2, `sluice quota: unknown command "list-all"`},
		{"set without entity", []string{"quota", "set", "producer_byte_rate=1"}, 2, "no entity: give --quota-user NAME"},
		{"set with the SASL --user", []string{"quota", "set", "--user", "alice", "producer_byte_rate=1"}, 2, "--user is the SASL login, not the quota's user"},
		{"set without values", []string{"quota", "set", "--quota-user", "a"}, 2, "missing KEY=VALUE"},
		{"set without =", []string{"quota", "set", "--quota-user", "a", "producer_byte_rate"}, 2, `"producer_byte_rate": want KEY=VALUE`},
		{"set a word", []string{"quota", "set", "--quota-user", "a", "producer_byte_rate=fast"}, 2, `producer_byte_rate: "fast" is not a number`},
		{"set NaN", []string{"quota", "set", "--quota-user", "a", "producer_byte_rate=NaN"}, 2, "is not a number"},
		{"set a key twice", []string{"quota", "set", "--quota-user", "a", "producer_byte_rate=1", "producer_byte_rate=2"}, 2, "producer_byte_rate given twice"},
		{"name and default", []string{"quota", "set", "--quota-user", "a", "--quota-user-default", "producer_byte_rate=1"}, 2, "--quota-user and --quota-user-default: give one"},
		{"empty name", []string{"quota", "set", "--client-id=", "producer_byte_rate=1"}, 2, "--client-id: empty name"},
		{"delete without keys", []string{"quota", "delete", "--quota-user", "a"}, 2, "missing KEY (a quota to remove), or --all"},
		{"delete keys and --all", []string{"quota", "delete", "--quota-user", "a", "--all", "producer_byte_rate"}, 2, "not both"},
		{"delete KEY=VALUE", []string{"quota", "delete", "--quota-user", "a", "producer_byte_rate=1"}, 2, "delete takes KEY, not KEY=VALUE"},
		{"delete without entity", []string{"quota", "delete", "--all"}, 2, "no entity"},
		{"describe --strict alone", []string{"quota", "describe", "--strict"}, 2, "--strict needs an entity"},
		{"describe with arguments", []string{"quota", "describe", "alice"}, 2, `unexpected arguments ["alice"]`},
		{"describe bad flag", []string{"quota", "describe", "--users", "a"}, 2, "flag provided but not defined: -users"},
		{"login without password", []string{"quota", "describe", "--quota-user", "a", "--user", "a"}, 2, "the quota's user is --quota-user"},
		{"unreachable", []string{"quotas", "describe"}, 1, "cannot reach a broker at " + dead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, errs := cli(t, dead, tc.args...)
			if rc != tc.rc || !strings.Contains(errs, tc.want) {
				t.Fatalf("sluice %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), rc, errs, tc.rc, tc.want)
			}
		})
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"quota", "delete", "-h"}, &out, &errb); rc != 0 || !strings.Contains(errb.String(), "--quota-user NAME | --quota-user-default") ||
		!strings.Contains(errb.String(), "-validate-only") {
		t.Fatalf("delete -h: exit %d %q", rc, errb.String())
	}
	out.Reset()
	if rc := run([]string{"quota", "help"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "controller_mutation_rate") {
		t.Fatalf("quota help: exit %d %q", rc, out.String())
	}
	out.Reset()
	if rc := run([]string{"help"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "quota      describe, set and delete client quotas") {
		t.Fatalf("help: exit %d %q", rc, out.String())
	}
}
