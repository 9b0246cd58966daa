package assignortest

import (
	"os/exec"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/sluicehq/sluice/plugins/assignor"
)

// Launch starts cmd (a built plugin binary) the way the broker does: go-plugin
// over gRPC only, AutoMTLS, the assignor handshake. It returns the dispensed
// assignor, which Check and Suite accept like an in-process one, and
// go-plugin's client (to watch or kill the process). The plugin is killed when
// the test ends; Launch fails t if it does not start or does not exit then.
//
//	bin := filepath.Join(t.TempDir(), "my-assignor")
//	// go build -o bin . (see examples/assignors/rack-aware)
//	c, _ := assignortest.Launch(t, exec.Command(bin))
//	assignortest.Suite(t, c) // through the process boundary
func Launch(t testing.TB, cmd *exec.Cmd) (*assignor.Client, *plugin.Client) {
	t.Helper()
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  assignor.Handshake,
		Plugins:          map[string]plugin.Plugin{assignor.PluginName: &assignor.Plugin{}},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Cmd:              cmd,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "host", Output: hclog.DefaultOutput, Level: hclog.Warn}),
	})
	t.Cleanup(func() {
		client.Kill()
		if !client.Exited() {
			t.Error("plugin not exited after Kill")
		}
	})
	rpc, err := client.Client()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rpc.Dispense(assignor.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := raw.(*assignor.Client)
	if !ok {
		t.Fatalf("dispensed %T, want *assignor.Client", raw)
	}
	return c, client
}
