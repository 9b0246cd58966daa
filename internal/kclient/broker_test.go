package kclient_test

// An external test package: testbroker imports the replication module, which imports
// kclient, so an internal test importing testbroker would be an import cycle.

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kclient"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestRealBroker round-trips a non-flexible and a flexible request against a real
// in-process broker, and negotiates versions.
func TestRealBroker(t *testing.T) {
	b := testbroker.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := kclient.Dial(ctx, b.Addr, kclient.Options{ClientID: "kclient-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vers, err := c.APIVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := vers[kmsg.Fetch.Int16()]; !ok || v < 12 {
		t.Fatalf("Fetch max version %d (%v)", v, ok)
	}
	for _, v := range []int16{1, 9, 12} { // v9+ is flexible
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		r, err := c.Request(ctx, req)
		if err != nil {
			t.Fatalf("metadata v%d: %v", v, err)
		}
		resp := r.(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].Port == 0 {
			t.Fatalf("metadata v%d: brokers %+v", v, resp.Brokers)
		}
	}
}
