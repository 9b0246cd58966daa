package console_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// The records endpoint refuses malformed and oversized requests with 400 before it
// reads anything, and answers 404 for what does not exist.
func TestRecordsRefusals(t *testing.T) {
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("t"))
	for range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + b.AdminAddr + "/v1/console/topics/"
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"t/records?limit=101", 400, "limit 101: want 1 to 100"},
		{"t/records?limit=0", 400, "want 1 to 100"},
		{"t/records?max_bytes=2097152", 400, "max_bytes 2097152"},
		{"t/records?offset=abc", 400, "offset: not an integer"},
		{"t/records?offset=-5", 400, "offset -5"},
		{"t/records?partition=99999999999", 400, "partition"},
		{"t/records?offset=1&timestamp=5", 400, "not both"},
		{"t/records?limit=1&cmd=rm", 400, `unknown parameter \"cmd\"`},
		{"t/records?partition=7", 404, "no partition 7"},
		{"nope/records", 404, "no partition 0 of topic nope"},
		{"nope", 404, "no topic nope"},
		{"t/records?offset=1&limit=1", 200, `"offset":1`},
		{"t/records?timestamp=0", 200, `"from":0`},
	} {
		resp, err := http.Get(base + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(body.String(), tc.want) {
			t.Errorf("%s: HTTP %d %s; want %d and %q", tc.query, resp.StatusCode, body.String(), tc.code, tc.want)
		}
	}
}

// With ACLs, the console's endpoints need Describe on the cluster (the admin gate),
// and reading records needs Read on the topic too.
func TestConsoleAuthorization(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(`
configs:
  super.users: "User:ANONYMOUS;User:admin"
  sasl.enabled.mechanisms: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
modules:
  auth: {use: acl, users: [{name: admin, password: admin-secret}, {name: viewer, password: viewer-secret}]}
`))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "secret"); err != nil {
		t.Fatal(err)
	}
	get := func(user, pass, path string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+b.AdminAddr+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("", "", "/v1/console/topics"); code != http.StatusUnauthorized {
		t.Fatalf("no credentials: HTTP %d", code)
	}
	if code := get("viewer", "viewer-secret", "/v1/console/topics"); code != http.StatusForbidden {
		t.Fatalf("viewer without Describe on the cluster: HTTP %d", code)
	}
	if code := get("admin", "admin-secret", "/v1/console/topics/secret/records"); code != http.StatusOK {
		t.Fatalf("admin reads records: HTTP %d", code)
	}
	if code := get("admin", "admin-secret", "/"); code != http.StatusOK {
		t.Fatalf("admin loads the page: HTTP %d", code)
	}
}

// A share group (KIP-932) in the console: listed with its type, members and lag, and
// its page shows each partition's start offset and lag.
func TestConsoleShareGroup(t *testing.T) {
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(t, kgo.DefaultProduceTopic("q"))
	for range 4 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, c)
	iac.Resources = append(iac.Resources, res)
	if resp, err := iac.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, resp)
	}
	sc := b.Client(t, kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"))
	got := 0
	for got < 3 && ctx.Err() == nil {
		sc.PollRecords(ctx, 3-got).EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept); got++ })
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		resp, err := http.Get("http://" + b.AdminAddr + "/v1/console/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: HTTP %d %s", path, resp.StatusCode, body.String())
		}
		return body.String()
	}
	testbroker.WaitFor(t, 20*time.Second, "the share group with lag 1", func() string {
		list, page := get("groups"), get("groups/sg")
		for _, want := range []string{`"group":"sg","type":"share"`, `"members":1`, `"lag":1`} {
			if !strings.Contains(list, want) {
				return "list: " + list
			}
		}
		for _, want := range []string{`"type":"share"`, `"topic":"q","partition":0,"committed":3`, `"assigned":["q/0"]`} {
			if !strings.Contains(page, want) {
				return "page: " + page
			}
		}
		return ""
	})
}
