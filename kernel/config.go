package kernel

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/kernel/suggest"
)

// Config is the broker's configuration file. Every key has a default, so an empty file
// (or none) runs a working single-node broker.
//
//	node_id: 1
//	data_dir: ./data
//	listeners: [{name: PLAINTEXT, address: 127.0.0.1:9092}]
//	admin_listen: 127.0.0.1:9644
//	configs: {auto.create.topics.enable: "true", num.partitions: "1"}
//	modules:
//	  storage:  {use: segmentlog}
//	  metadata: {use: raft}
type Config struct {
	// NodeID is this broker's id, unique in its cluster (Kafka's node.id).
	NodeID int32 `yaml:"node_id"`
	// DataDir holds the partition logs, the metadata log and the group offsets.
	DataDir string `yaml:"data_dir"`
	// Rack is this broker's rack (broker.rack): replica placement spreads over racks.
	Rack string `yaml:"rack"`
	// Listeners are the client listeners: name (PLAINTEXT, SSL, SASL_PLAINTEXT,
	// SASL_SSL or a name mapped by listener.security.protocol.map), address and
	// optionally the advertised host:port.
	Listeners []ListenerConfig `yaml:"listeners"`
	// AdminListen is the admin HTTP listener: health, metrics, transforms, plugins.
	AdminListen string `yaml:"admin_listen"`
	// AdminPprof serves Go's profiler under /debug/pprof/ on the admin listener. Off by
	// default: a profile exposes internals and costs CPU while it runs.
	AdminPprof bool `yaml:"admin_pprof"`
	// AdminTLS serves the admin HTTP listener over TLS with the client listeners' key
	// and trust stores (the ssl.* configs, ssl.client.auth included).
	AdminTLS bool `yaml:"admin_tls"`
	// AdminMaxBodyBytes bounds an admin request's body (413 over it; default 64 MiB, a
	// transform module's maximum) and AdminMaxConcurrentUploads the requests with a
	// body served at once (429 over it; default 2). adminlimit.go says why.
	AdminMaxBodyBytes int64 `yaml:"admin_max_body_bytes"`
	// AdminMaxConcurrentUploads: see AdminMaxBodyBytes.
	AdminMaxConcurrentUploads int `yaml:"admin_max_concurrent_uploads"`
	// Configs are static broker configs by Kafka name. Values are strings as in
	// server.properties.
	Configs map[string]string `yaml:"configs"`
	// Modules maps a role to its section; `use:` names the implementation, the other
	// keys are that module's own config, decoded strictly into it.
	Modules map[string]yaml.Node `yaml:"modules"`
	Log     LogSettings          `yaml:"log"`
}

// ListenerConfig is one client listener.
type ListenerConfig struct {
	Name    string `yaml:"name"`
	Address string `yaml:"address"`
	// Advertised is the host:port clients are told to use (default: the bound address).
	Advertised string `yaml:"advertised"`
}

// LogSettings configures the broker's own log output.
type LogSettings struct {
	Level  string `yaml:"level"`  // debug, info (default), warn, error
	Format string `yaml:"format"` // text (default) or json
}

// Defaults for a config with nothing set.
const (
	DefaultListen      = "127.0.0.1:9092"
	DefaultAdminListen = "127.0.0.1:9644"
	DefaultDataDir     = "./data"
)

// defaultModules returns the implementation used for each role the config names none for.
func defaultModules() map[string]string {
	return map[string]string{
		"storage":     "segmentlog",
		"metadata":    "raft",
		"replication": "isr",
		"auth":        "none",
		"groups":      "coordinator",
		"transforms":  "wasm",
		"txn":         "coordinator",
		"console":     "web",
		"quotas":      "window",
		"telemetry":   "otlp",
	}
}

// ParseConfig decodes a config file strictly: unknown keys are errors, all of them
// reported at once (a ConfigErrors) with their lines and "did you mean" hints.
func ParseConfig(data []byte) (*Config, error) {
	c, err := DecodeConfig(data)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeConfig is ParseConfig that also returns what it decoded when the YAML parsed
// but has problems (a ConfigErrors), so a caller can report them together with
// CheckConfig's (serve does, with its flags applied in between). c is nil only when
// the file is no YAML at all.
func DecodeConfig(data []byte) (c *Config, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c = &Config{}
	if err := decodeStrict(&doc, c, ""); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// LoadConfig reads and parses a config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// applyDefaults fills unset fields and checks the top-level settings.
func (c *Config) applyDefaults() error {
	if c.NodeID == 0 {
		c.NodeID = 1
	}
	if c.NodeID < 0 {
		return fmt.Errorf("config: node_id must be positive, got %d", c.NodeID)
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if len(c.Listeners) == 0 {
		c.Listeners = []ListenerConfig{{Name: "PLAINTEXT", Address: DefaultListen}}
	}
	names := map[string]bool{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Name == "" {
			l.Name = "PLAINTEXT"
		}
		if names[l.Name] {
			return fmt.Errorf("config: listener %q defined twice", l.Name)
		}
		names[l.Name] = true
		if _, _, err := net.SplitHostPort(l.Address); err != nil {
			return fmt.Errorf("config: listener %q address %q: %w", l.Name, l.Address, err)
		}
		if l.Advertised != "" {
			if _, _, err := net.SplitHostPort(l.Advertised); err != nil {
				return fmt.Errorf("config: listener %q advertised %q: %w", l.Name, l.Advertised, err)
			}
		}
	}
	if c.AdminListen == "" {
		c.AdminListen = DefaultAdminListen
	}
	if c.Configs == nil {
		c.Configs = map[string]string{}
	}
	return c.applyAdvertisedListeners()
}

// applyAdvertisedListeners takes Kafka's advertised.listeners from `configs:`
// ("NAME://host:port,..."): each entry gives its listener's advertised address, as
// a listener's own `advertised` does. An entry for a listener that is not defined, or
// one that disagrees with the listener's `advertised`, is an error.
func (c *Config) applyAdvertisedListeners() error {
	raw := strings.TrimSpace(c.Configs["advertised.listeners"])
	if raw == "" {
		return nil
	}
	for _, e := range strings.Split(raw, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(e), "://")
		if !ok || name == "" {
			return fmt.Errorf("config: advertised.listeners: %q is not NAME://host:port", e)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("config: advertised.listeners: %q: %w", e, err)
		}
		i := slices.IndexFunc(c.Listeners, func(l ListenerConfig) bool { return strings.EqualFold(l.Name, name) })
		switch {
		case i < 0:
			return fmt.Errorf("config: advertised.listeners names listener %q, which listeners does not define", name)
		case c.Listeners[i].Advertised != "" && c.Listeners[i].Advertised != addr:
			return fmt.Errorf("config: listener %q is advertised as %q and, in advertised.listeners, as %q", name, c.Listeners[i].Advertised, addr)
		}
		c.Listeners[i].Advertised = addr
	}
	return nil
}

// moduleSection is one role's section split into the chosen name and the module's own
// keys, re-encoded for strict decoding.
type moduleSection struct {
	role, use string
	node      *yaml.Node // the section without `use` (lines kept); nil when empty
	line      int        // the section's line in the file; 0 for a default
}

// sections resolves each role's implementation against the registry. Every bad
// section is reported, at once (a ConfigErrors); the good ones are returned with the
// error, for CheckConfig to go on checking.
func (c *Config) sections(reg *Registry) (map[string]moduleSection, error) {
	defaults := defaultModules()
	out := map[string]moduleSection{}
	for role, use := range defaults {
		// A default applies only when the registry has it, so a registry with a
		// smaller module set (tests) composes a smaller broker.
		if _, ok := reg.lookupIn(role, use); ok {
			out[role] = moduleSection{role: role, use: use}
		}
	}
	var errs ConfigErrors
	for _, role := range slices.Sorted(maps.Keys(c.Modules)) {
		node := c.Modules[role]
		sec := moduleSection{role: role, use: defaults[role], line: node.Line}
		switch node.Kind {
		case 0: // `storage:` with no value
		case yaml.MappingNode:
			use, rest, err := splitUse(&node)
			if err != nil {
				errs = append(errs, fmt.Errorf("modules.%s%w", role, err))
				continue
			}
			if use != "" {
				sec.use = use
			}
			sec.node = rest
		default:
			errs = append(errs, fmt.Errorf("line %d: modules.%s must be a mapping with a `use:` key", node.Line, role))
			continue
		}
		if _, ok := reg.lookupIn(role, sec.use); !ok {
			delete(out, role)
			errs = append(errs, unknownModule(reg, role, sec.use, node.Line))
			continue
		}
		out[role] = sec
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("config: %w", errs)
	}
	return out, nil
}

// unknownModule says what is wrong with modules.<role>'s `use:` and what would be right.
func unknownModule(reg *Registry, role, use string, line int) error {
	known := reg.Names(role)
	if len(known) == 0 {
		roles := reg.Roles()
		return fmt.Errorf("line %d: unknown module role %q%s (roles: %s)", line, role, suggest.Hint(role, roles), strings.Join(roles, ", "))
	}
	if use == "" {
		return fmt.Errorf("line %d: modules.%s: no `use:` and no default implementation (known: %s)", line, role, strings.Join(known, ", "))
	}
	return fmt.Errorf("line %d: unknown module %q for modules.%s%s (known: %s)", line, use, role, suggest.Hint(use, known), strings.Join(known, ", "))
}

// newModules makes the module of each section and decodes its keys into it, then runs
// every module's Check. All problems of all sections are reported at once (a
// ConfigErrors); nothing is provisioned, bound or written.
func newModules(secs map[string]moduleSection, reg *Registry, nodeID int32) (map[string]Module, error) {
	out := map[string]Module{}
	var errs ConfigErrors
	for _, role := range slices.Sorted(maps.Keys(secs)) {
		sec := secs[role]
		mi, _ := reg.Lookup(role + "." + sec.use)
		m := mi.New()
		// Check runs even after a bad key: an unknown key decodes to nothing and a
		// value of the wrong type leaves the default, so what Check finds is real.
		err := decodeModule("modules."+role, sec.node, m)
		errs = errs.Add(err)
		if c, ok := m.(Checker); ok {
			if cerr := c.Check(CheckContext{Registry: reg, NodeID: nodeID}); cerr != nil {
				var ce ConfigErrors
				switch {
				case errors.As(cerr, &ce): // its problems name their lines
				case sec.line > 0:
					cerr = fmt.Errorf("line %d: modules.%s (%s): %w", sec.line, role, mi.ID, cerr)
				default:
					cerr = fmt.Errorf("modules.%s (%s): %w", role, mi.ID, cerr)
				}
				errs = errs.Add(cerr)
				err = cerr
			}
		}
		if err == nil {
			out[role] = m
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errs)
	}
	return out, nil
}

// CheckConfig checks cfg as New does, without making a kernel: the top-level settings,
// every role, module name and module key, and every module's Check, the problems all
// reported at once (a ConfigErrors). Nothing is bound, created or written. It fills
// cfg's defaults, as New does.
func CheckConfig(cfg *Config, reg *Registry) error {
	if err := cfg.applyDefaults(); err != nil {
		return err
	}
	secs, err := cfg.sections(reg)
	var errs ConfigErrors
	errs = errs.Add(err)
	_, err = newModules(secs, reg, cfg.NodeID)
	errs = errs.Add(err)
	if len(errs) > 0 {
		return fmt.Errorf("config: %w", errs)
	}
	return nil
}

// errBadUse is splitUse's error for a `use:` that is not a name; the caller prefixes
// the section's path.
var errBadUse = errors.New(".use must be a module name")

// splitUse splits a mapping section into the name its `use:` key gives ("" when there is
// none) and a mapping of the other keys (nil when there are none), their nodes (and
// so their lines) kept. Role sections (modules.<role>) and guest sections
// (Registry.NewGuest) share it, so both read `use:` the same way.
func splitUse(node *yaml.Node) (use string, rest *yaml.Node, err error) {
	rest = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: node.Line, Column: node.Column}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		if k.Value == "use" {
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				return "", nil, fmt.Errorf("%w (line %d)", errBadUse, v.Line)
			}
			use = v.Value
			continue
		}
		rest.Content = append(rest.Content, k, v)
	}
	if len(rest.Content) == 0 {
		return use, nil, nil
	}
	return use, rest, nil
}

// decodeModule decodes a module's section strictly into the module value m; path
// names the section in messages.
func decodeModule(path string, node *yaml.Node, m Module) error {
	if node == nil {
		return nil
	}
	if err := decodeStrict(node, m, path); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// brokerInt reads an integer broker config with a default.
func (c *Config) brokerInt(name string, def int64) (int64, error) {
	v, ok := c.Configs[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("config: configs.%s: %q is not an integer", name, v)
	}
	return n, nil
}
