package interbroker_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/interbroker"
	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

// A Peers reaches a broker by its id in the image, negotiates the version, reuses its
// connection, dials again after a failure, and refuses everything once closed.
func TestPeers(t *testing.T) {
	b := testbroker.Start(t)
	host, port, err := net.SplitHostPort(b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	im := &kernel.Image{Brokers: map[int32]*kernel.BrokerImage{
		1: {ID: 1, Endpoints: []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: host, Port: int32(p), Protocol: kernel.ProtocolPlaintext}}},
	}}
	sec := &interbroker.Security{Listener: "PLAINTEXT", Protocol: kernel.ProtocolPlaintext}
	peers := interbroker.NewPeers(sec, func() *kernel.Image { return im }, "peers-test")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	metadata := func() error {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := peers.Request(ctx, 1, req)
		if err != nil {
			return err
		}
		if req.Version < 9 || len(resp.(*kmsg.MetadataResponse).Brokers) != 1 {
			t.Errorf("Metadata v%d: %+v", req.Version, resp)
		}
		return nil
	}
	if err := metadata(); err != nil {
		t.Fatal(err)
	}
	if v, err := peers.MaxVersion(ctx, 1, kmsg.Metadata.Int16()); err != nil || v < 9 {
		t.Errorf("MaxVersion(Metadata) = %d, %v", v, err)
	}
	if v, err := peers.MaxVersion(ctx, 1, 32000); err != nil || v != -1 {
		t.Errorf("MaxVersion(unknown key) = %d, %v; want -1", v, err)
	}
	if _, err := peers.Request(ctx, 2, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("a request to a broker not in the image succeeded")
	}
	// A request whose context is already done breaks the connection; the next one dials again.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	if _, err := peers.Request(done, 1, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Error("a request with a cancelled context succeeded")
	}
	if err := metadata(); err != nil {
		t.Fatalf("after a failed request: %v", err)
	}
	peers.Close()
	if _, err := peers.Request(ctx, 1, kmsg.NewPtrMetadataRequest()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("after Close: %v, want net.ErrClosed", err)
	}
}
