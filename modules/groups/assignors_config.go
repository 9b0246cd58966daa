package groups

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// AssignorConfig is one item of the module's `assignors:` list: either the name of a
// groups.assignor guest (a YAML string, e.g. `uniform` or `range`: guests.go) or an
// assignor plugin (a mapping, which configures the groups.assignor.plugin guest):
//
//	assignors:
//	  - name: rack-aware          # the name clients ask for (ServerAssignor)
//	    plugin: ./bin/rack-aware  # executable serving plugins/assignor (go-plugin, gRPC)
//	    sha256: 9f86d0...         # optional: the binary's checksum, checked at each launch
//	    timeout_ms: 1000          # per-call deadline (default 1000)
//	    fallback: uniform         # built-in used while the plugin is down or misbehaves
//	    args: [--verbose]         # optional arguments
//	    env: {RACKS: "a,b"}       # optional environment (added to the broker's)
//	  - uniform
//	  - range
//
// A plugin may take a built-in's name ("uniform", "range"): it then replaces the
// built-in for the clients that ask for it (franz-go asks for "uniform" or "range"
// by its balancer, Kafka's consumer for "uniform" by default). A fallback is always
// the built-in of that name.
type AssignorConfig struct {
	// Name is the assignor's name, the one clients ask for (ServerAssignor).
	Name string `yaml:"name"`
	// Plugin is the executable serving plugins/assignor (go-plugin over gRPC).
	Plugin string `yaml:"plugin,omitempty"`
	// SHA256 is the plugin binary's hex checksum, checked at each launch when set.
	SHA256 string `yaml:"sha256,omitempty"`
	// TimeoutMs is one plugin call's deadline (default 1000).
	TimeoutMs int64 `yaml:"timeout_ms,omitempty"`
	// Fallback is the built-in assignor used while the plugin is down or misbehaves.
	Fallback string `yaml:"fallback,omitempty"`
	// Args are the plugin's command-line arguments.
	Args []string `yaml:"args,omitempty"`
	// Env is added to the broker's environment for the plugin process.
	Env map[string]string `yaml:"env,omitempty"`
}

// defaultPluginTimeoutMs is a plugin call's deadline when timeout_ms is not set.
const defaultPluginTimeoutMs = 1000

// assignorConfigKeys are the keys a plugin item may have.
var assignorConfigKeys = []string{"name", "plugin", "sha256", "timeout_ms", "fallback", "args", "env"}

// UnmarshalYAML accepts a scalar (a built-in's name) or a mapping with the keys
// above; unknown keys are errors (the kernel decodes strictly, but a custom
// unmarshaler's Decode is not).
func (c *AssignorConfig) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "" && n.Tag != "!!str" {
			return fmt.Errorf("line %d: assignor %q: want a name or a mapping", n.Line, n.Value)
		}
		*c = AssignorConfig{Name: n.Value}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if !slices.Contains(assignorConfigKeys, k.Value) {
				return fmt.Errorf("line %d: assignor: unknown key %q (known: %s)", k.Line, k.Value, strings.Join(assignorConfigKeys, ", "))
			}
		}
		type plain AssignorConfig // without the method
		var p plain
		if err := n.Decode(&p); err != nil {
			return fmt.Errorf("assignor: %w", err)
		}
		*c = AssignorConfig(p)
		return nil
	default:
		return fmt.Errorf("line %d: assignor: want a name or a mapping", n.Line)
	}
}

// MarshalYAML writes a built-in back as its name.
func (c AssignorConfig) MarshalYAML() (any, error) {
	if c.Plugin == "" && c.SHA256 == "" && c.TimeoutMs == 0 && c.Fallback == "" && len(c.Args) == 0 && len(c.Env) == 0 {
		return c.Name, nil
	}
	type plain AssignorConfig
	return plain(c), nil
}

// isPlugin reports whether c configures a plugin.
func (c AssignorConfig) isPlugin() bool { return c.Plugin != "" }

// validateName checks what every item needs; an item naming a guest (no `plugin:`)
// carries nothing else.
func (c AssignorConfig) validateName() error {
	if c.Name == "" {
		return errors.New("an assignor needs a name")
	}
	if !c.isPlugin() && (c.SHA256 != "" || c.TimeoutMs != 0 || c.Fallback != "" || len(c.Args) != 0 || len(c.Env) != 0) {
		return fmt.Errorf("assignor %q: sha256, timeout_ms, fallback, args and env apply to plugins only", c.Name)
	}
	return nil
}

// validate checks a plugin item (the groups.assignor.plugin guest's config).
func (c AssignorConfig) validate() error {
	if err := c.validateName(); err != nil {
		return err
	}
	if !c.isPlugin() {
		return fmt.Errorf("assignor %q: a plugin needs `plugin:`", c.Name)
	}
	fi, err := os.Stat(c.Plugin)
	switch {
	case err != nil:
		return fmt.Errorf("assignor plugin %q: %w", c.Name, err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return fmt.Errorf("assignor plugin %q: %s is not an executable file", c.Name, c.Plugin)
	}
	if c.SHA256 != "" {
		if b, err := hex.DecodeString(c.SHA256); err != nil || len(b) != 32 {
			return fmt.Errorf("assignor plugin %q: sha256 must be 64 hex characters", c.Name)
		}
	}
	if c.TimeoutMs < 0 {
		return fmt.Errorf("assignor plugin %q: timeout_ms must be > 0", c.Name)
	}
	if c.Fallback != "" && assignor.Builtin(c.Fallback) == nil {
		return fmt.Errorf("assignor plugin %q: fallback %q is not a built-in assignor (uniform, range)", c.Name, c.Fallback)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("assignor plugin %q: bad env name %q", c.Name, k)
		}
	}
	return nil
}

// withDefaults fills a plugin item's defaults.
func (c AssignorConfig) withDefaults() AssignorConfig {
	if c.TimeoutMs == 0 {
		c.TimeoutMs = defaultPluginTimeoutMs
	}
	if c.Fallback == "" {
		c.Fallback = assignor.Uniform{}.Name()
	}
	return c
}
