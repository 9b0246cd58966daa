package assignor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/sluicehq/sluice/plugins/assignor/proto"
)

// ProtocolVersion is the version of the plugin protocol: the go-plugin
// handshake's protocol version and the sluice.assignor.v1 gRPC package. Host
// and plugin must agree on it.
const ProtocolVersion = 1

// Handshake is the go-plugin handshake of assignor plugins. The magic cookie
// only keeps a plugin binary from being run by hand by mistake; it is not a
// security measure.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "SLUICE_ASSIGNOR_PLUGIN",
	MagicCookieValue: "0f110f70cc915b42e04fb1965e189b8e2416ce84543c93061d906c15a9347920",
}

// PluginName is the name of the assignor plugin in go-plugin's plugin set
// (what the host dispenses).
const PluginName = "assignor"

// logger writes hclog's JSON lines to stderr, which go-plugin forwards to the
// host's log.
var logger = hclog.New(&hclog.LoggerOptions{
	Name:       "assignor",
	Level:      hclog.Info,
	Output:     os.Stderr,
	JSONFormat: true,
})

// Logger returns the plugin's logger: it writes to stderr, which the host
// reads and merges into the broker's log. Plugins should log through it (or
// at least only to stderr: stdout belongs to go-plugin).
func Logger() hclog.Logger { return logger }

// Serve runs impl as a plugin process (go-plugin gRPC, AutoMTLS-capable). It
// never returns: the process exits when the host stops the plugin. Call it
// from main:
//
//	func main() { assignor.Serve(myAssignor{}) }
//
// Started by hand rather than by the broker, the binary prints a short
// explanation and exits with status 1.
func Serve(impl Assignor) {
	if impl == nil {
		logger.Error("assignor.Serve: nil Assignor")
		os.Exit(1)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{PluginName: &Plugin{Impl: impl}},
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          logger,
	})
	os.Exit(0)
}

// Plugin is the go-plugin plugin.GRPCPlugin of an assignor, for both sides;
// Impl is set on the plugin side.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Assignor
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the Assignor service, backed by p.Impl, on s.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return fmt.Errorf("assignor plugin: no Impl")
	}
	pb.RegisterAssignorServer(s, &server{impl: p.Impl})
	return nil
}

// InfoTimeout bounds the Info call GRPCClient makes when the host dispenses
// the plugin.
const InfoTimeout = 10 * time.Second

// GRPCClient returns a *Client for the plugin behind c. It asks the plugin for
// its Info (name and protocol version) once, now; a plugin that does not
// answer within InfoTimeout, or speaks another protocol version, is an error.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	rpc := pb.NewAssignorClient(c)
	ctx, cancel := context.WithTimeout(ctx, InfoTimeout)
	defer cancel()
	info, err := rpc.Info(ctx, &pb.InfoRequest{ProtocolVersion: ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("assignor plugin: info: %w", err)
	}
	if info.GetProtocolVersion() != ProtocolVersion {
		return nil, fmt.Errorf("assignor plugin %q: protocol version %d, want %d", info.GetName(), info.GetProtocolVersion(), ProtocolVersion)
	}
	if info.GetName() == "" {
		return nil, fmt.Errorf("assignor plugin: empty name")
	}
	return &Client{rpc: rpc, name: info.GetName()}, nil
}

// Client is the host's view of a running plugin: it implements Assignor (Name
// from the plugin's Info at dispense time; Assign is one RPC honouring ctx's
// deadline). It is safe for concurrent use.
type Client struct {
	rpc  pb.AssignorClient
	name string
}

var _ Assignor = (*Client)(nil)

// Name returns the name the plugin reported when it was dispensed.
func (c *Client) Name() string { return c.name }

// Assign sends in to the plugin and returns its assignment. The result is
// converted but not checked against in: run Check on it (the broker runs its
// own). When ctx ends first the error wraps ctx.Err(); when the plugin
// rejects in (its error wraps ErrInvalidInput) the error wraps
// ErrInvalidInput too. An invalid in (see Validate) is rejected without a
// call.
func (c *Client) Assign(ctx context.Context, in Input) (Assignment, error) {
	// Some invalid inputs (a Topics key that differs from its topic's id)
	// cannot be sent, so the host side checks them all.
	if err := Validate(in); err != nil {
		return nil, err
	}
	resp, err := c.rpc.Assign(ctx, InputToProto(in))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("assignor plugin %q: %w", c.name, ctx.Err())
		}
		switch status.Code(err) { // gRPC may see the deadline before ctx.Err does
		case codes.DeadlineExceeded:
			return nil, fmt.Errorf("assignor plugin %q: %w: %v", c.name, context.DeadlineExceeded, err)
		case codes.Canceled:
			return nil, fmt.Errorf("assignor plugin %q: %w: %v", c.name, context.Canceled, err)
		}
		if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
			return nil, fmt.Errorf("assignor plugin %q: %w: %s", c.name, ErrInvalidInput, st.Message())
		}
		return nil, fmt.Errorf("assignor plugin %q: %w", c.name, err)
	}
	out, err := AssignmentFromProto(resp)
	if err != nil {
		return nil, fmt.Errorf("assignor plugin %q: malformed assignment: %w", c.name, err)
	}
	return out, nil
}

// server is the plugin side of the gRPC service.
type server struct {
	pb.UnimplementedAssignorServer
	impl Assignor
}

func (s *server) Info(_ context.Context, _ *pb.InfoRequest) (resp *pb.InfoResponse, err error) {
	defer recoverRPC("Name", &err)
	return &pb.InfoResponse{Name: s.impl.Name(), ProtocolVersion: ProtocolVersion}, nil
}

func (s *server) Assign(ctx context.Context, req *pb.AssignRequest) (resp *pb.AssignResponse, err error) {
	in, err := InputFromProto(req)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "malformed request: %v", err)
	}
	defer recoverRPC("Assign", &err)
	out, err := s.impl.Assign(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if errors.Is(err, ErrInvalidInput) {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return nil, status.Error(codes.Unknown, err.Error())
	}
	return AssignmentToProto(out), nil
}

// recoverRPC turns a panic in the assignor into an Internal RPC error, logged
// with its stack, so one bad input does not kill the plugin.
func recoverRPC(method string, err *error) {
	if r := recover(); r != nil {
		logger.Error("assignor panicked", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "assignor %s panicked: %v", method, r)
	}
}
