package transforms

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/kernel"
)

// Namespace is the metadata extension namespace of transform deployments: one key per
// transform name (see kernel.ExtensionStore).
const Namespace = "transforms"

// Modes and policies.
const (
	ModeInline  = "inline"
	ModeDerived = "derived"

	PolicyReject = "reject"
	PolicyDrop   = "drop"
	PolicyDLQ    = "dlq"
)

// MaxOutputs bounds the output topics of a derived transform.
const MaxOutputs = 8

// MaxBinaryBytes bounds a deployed WASM binary (uncompressed).
const MaxBinaryBytes = 64 << 20

// Deployment is a transform as stored in the metadata log.
//
// Why the metadata log, binary included: every broker must run the same transforms,
// and the metadata log already reaches every broker, survives restarts and is applied
// before a broker serves (so a produce can never slip past a transform that is
// deployed). An internal topic would keep the Raft log smaller but would need every
// broker to fetch binaries from that topic's leader before serving, a second
// replication path with its own failure modes. Binaries are zstd-compressed (Go WASM
// binaries shrink about 4x) and bounded by kernel.MaxExtensionValueBytes.
//
// Stored value (frozen; a change bumps the magic):
//
//	| "SLTX1" | header_len u32 BE | header JSON | zstd(wasm) |
type Deployment struct {
	Name             string            `json:"name"`
	Input            string            `json:"input"`
	Outputs          []string          `json:"outputs,omitempty"`
	Mode             string            `json:"mode"`
	Policy           string            `json:"policy"`
	DLQTopic         string            `json:"dlq_topic,omitempty"`
	MemoryLimitPages uint32            `json:"memory_limit_pages,omitempty"`
	TimeoutMs        int64             `json:"timeout_ms,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	SHA256           string            `json:"sha256"`
	Size             int               `json:"size"`
	DeployedAtMs     int64             `json:"deployed_at_ms"`
}

var magic = []byte("SLTX1")

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,200}$`)

// ErrInvalid marks a deployment refused for its settings.
var ErrInvalid = errors.New("invalid transform")

// Validate checks the settings against the image: names, topics, mode and policy.
func (d *Deployment) Validate(im *kernel.Image, inlineOwner func(topic string) string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(d.Name) {
		return bad("name %q: want 1-200 of [a-zA-Z0-9._-]", d.Name)
	}
	if d.Mode == "" {
		d.Mode = ModeInline
	}
	if d.Policy == "" {
		d.Policy = PolicyReject
	}
	if im.Topic(d.Input) == nil {
		return bad("input topic %q does not exist", d.Input)
	}
	if t := im.Topic(d.Input); t.Internal {
		return bad("input topic %q is internal", d.Input)
	}
	switch d.Mode {
	case ModeInline:
		if len(d.Outputs) > 0 && !(len(d.Outputs) == 1 && d.Outputs[0] == d.Input) {
			return bad("an inline transform writes to its input topic; outputs are for --mode derived")
		}
		d.Outputs = nil
		if owner := inlineOwner(d.Input); owner != "" && owner != d.Name {
			return bad("topic %q already has the inline transform %q", d.Input, owner)
		}
	case ModeDerived:
		if len(d.Outputs) == 0 || len(d.Outputs) > MaxOutputs {
			return bad("a derived transform needs 1 to %d output topics", MaxOutputs)
		}
		seen := map[string]bool{}
		for _, o := range d.Outputs {
			if o == d.Input {
				return bad("output topic %q is the input topic", o)
			}
			if seen[o] {
				return bad("output topic %q listed twice", o)
			}
			seen[o] = true
			if im.Topic(o) == nil {
				return bad("output topic %q does not exist", o)
			}
		}
	default:
		return bad("mode %q: want inline or derived", d.Mode)
	}
	switch d.Policy {
	case PolicyReject, PolicyDrop:
	case PolicyDLQ:
		if d.DLQTopic == "" {
			d.DLQTopic = d.Input + "." + d.Name + ".dlq"
		}
		if d.DLQTopic == d.Input || (len(d.Outputs) > 0 && contains(d.Outputs, d.DLQTopic)) {
			return bad("the dead-letter topic must not be the input or an output")
		}
	default:
		return bad("policy %q: want reject, drop or dlq", d.Policy)
	}
	if d.TimeoutMs < 0 || d.TimeoutMs > 60_000 {
		return bad("timeout_ms %d: want 0 (default) to 60000", d.TimeoutMs)
	}
	if d.MemoryLimitPages > 65536 {
		return bad("memory_limit_pages %d: at most 65536 (4 GiB)", d.MemoryLimitPages)
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Encode returns the stored value of d with its binary.
func Encode(d *Deployment, wasm []byte) ([]byte, error) {
	sum := sha256.Sum256(wasm)
	d.SHA256, d.Size = hex.EncodeToString(sum[:]), len(wasm)
	hdr, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	out := append([]byte{}, magic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(hdr)))
	out = append(out, hdr...)
	out = enc.EncodeAll(wasm, out)
	if len(out) > kernel.MaxExtensionValueBytes {
		return nil, fmt.Errorf("%w: the compressed module is %d bytes, more than %d", ErrInvalid, len(out), kernel.MaxExtensionValueBytes)
	}
	return out, nil
}

// DecodeHeader returns the deployment stored in v, without decompressing the binary.
func DecodeHeader(v []byte) (*Deployment, error) {
	if !bytes.HasPrefix(v, magic) || len(v) < len(magic)+4 {
		return nil, errors.New("transforms: stored deployment has an unknown format")
	}
	n := int(binary.BigEndian.Uint32(v[len(magic):]))
	rest := v[len(magic)+4:]
	if n > len(rest) {
		return nil, errors.New("transforms: stored deployment is truncated")
	}
	var d Deployment
	if err := json.Unmarshal(rest[:n], &d); err != nil {
		return nil, fmt.Errorf("transforms: stored deployment: %w", err)
	}
	return &d, nil
}

// DecodeBinary returns the WASM binary stored in v, checked against its digest.
func DecodeBinary(v []byte, d *Deployment) ([]byte, error) {
	n := int(binary.BigEndian.Uint32(v[len(magic):]))
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxBinaryBytes))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	wasm, err := dec.DecodeAll(v[len(magic)+4+n:], nil)
	if err != nil {
		return nil, fmt.Errorf("transforms: stored binary of %s: %w", d.Name, err)
	}
	sum := sha256.Sum256(wasm)
	if hex.EncodeToString(sum[:]) != d.SHA256 {
		return nil, fmt.Errorf("transforms: stored binary of %s does not match its sha256", d.Name)
	}
	return wasm, nil
}
