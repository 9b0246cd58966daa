package interbroker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/kclient"
	"github.com/sluicehq/sluice/kernel"
)

// Dial connects to broker id of im on its inter-broker listener, with this broker's
// TLS and SASL (the other broker's certificate is checked against its advertised
// host), and asks its ApiVersions. Errors of TLS and SASL wrap kclient.ErrTLS and
// kclient.ErrSASL; a failed login wraps the mechanism's error too.
func (s *Security) Dial(ctx context.Context, im *kernel.Image, id int32, clientID string, maxResponse int32) (*kclient.Conn, map[int16]int16, error) {
	b := im.Brokers[id]
	if b == nil {
		return nil, nil, fmt.Errorf("broker %d is not in the metadata image", id)
	}
	ep, ok := b.Endpoint(s.Listener)
	if !ok {
		return nil, nil, fmt.Errorf("broker %d has no listener %q", id, s.Listener)
	}
	addr := net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
	opts := kclient.Options{ClientID: clientID, DialTimeout: 10 * time.Second, MaxResponseBytes: maxResponse}
	opts.TLS = s.ClientTLS(ep.Host)
	var err error
	if opts.SASL, err = s.Mechanism(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", kclient.ErrSASL, err)
	}
	conn, err := kclient.Dial(ctx, addr, opts)
	if err != nil {
		return nil, nil, err
	}
	vers, err := conn.APIVersions(ctx)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return conn, vers, nil
}
