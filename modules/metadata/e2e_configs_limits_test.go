package metadata_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// APPEND of a long list must take time linear in its length: one request of a few MB
// must not keep a handler busy for minutes.
func TestE2EIncrementalAppendLongList(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "lists"); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for i := range 300000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("x" + strconv.Itoa(i))
	}
	v := sb.String()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "lists"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = "cleanup.policy", kmsg.IncrementalAlterConfigOpAppend, &v
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	start := time.Now()
	resp, err := req.RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	if resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Errorf("append of bogus policies: code %d", resp.Resources[0].ErrorCode)
	}
	// A guard against quadratic work (minutes), not a performance figure: loose enough
	// for a loaded 2-core CI machine under -race.
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("append of a 300,000-item list took %v", d)
	}
}
