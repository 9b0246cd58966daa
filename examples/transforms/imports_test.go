package transforms_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestExamplesBuildForWasip1 builds each example with GOOS=wasip1 GOARCH=wasm
// and checks its imports: only WASI preview 1 and one transform ABI, as the
// broker requires at deploy time (sdk-wasm/ABI.md, "Module shape").
func TestExamplesBuildForWasip1(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm modules")
	}
	sluice := []string{"check_abi", "emit", "fail", "next_batch"}
	for name, want := range map[string]struct {
		module string
		funcs  []string
	}{
		"redact-json":      {"sluice_transform_v1", sluice},
		"filter-by-header": {"sluice_transform_v1", sluice},
		"route-by-key":     {"sluice_transform_v1", sluice},
		// Only a transform that calls Source imports batch_source.
		"stamp-producer":     {"sluice_transform_v1", []string{"batch_source", "check_abi", "emit", "fail", "next_batch"}},
		"redpanda-uppercase": {"redpanda_transform", nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), name+".wasm")
			cmd := exec.Command("go", "build", "-o", out, "./"+name)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, b)
			}
			bin, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			imports, exports, err := wasmImportsExports(bin)
			if err != nil {
				t.Fatal(err)
			}
			var abi []string
			for _, im := range imports {
				switch im[0] {
				case "wasi_snapshot_preview1":
				case want.module:
					abi = append(abi, im[1])
				default:
					t.Errorf("imports %s.%s", im[0], im[1])
				}
			}
			if len(abi) == 0 {
				t.Errorf("no imports from %s", want.module)
			}
			slices.Sort(abi)
			if want.funcs != nil && !slices.Equal(abi, want.funcs) {
				t.Errorf("imports from %s: %v, want %v", want.module, abi, want.funcs)
			}
			if !slices.Contains(exports, "_start") || !slices.Contains(exports, "memory") {
				t.Errorf("exports %v, want _start and memory", exports)
			}
		})
	}
}

// wasmImportsExports returns the (module, name) pairs of a module's imports
// and the names of its exports.
func wasmImportsExports(b []byte) (imports [][2]string, exports []string, err error) {
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		return nil, nil, errors.New("not a wasm module")
	}
	p := b[8:]
	uleb := func() uint64 {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			err = errors.New("bad LEB128")
			p = nil
			return 0
		}
		p = p[n:]
		return v
	}
	name := func() string {
		n := uleb()
		if n > uint64(len(p)) {
			err = errors.New("name past end")
			p = nil
			return ""
		}
		s := string(p[:n])
		p = p[n:]
		return s
	}
	for len(p) > 0 && err == nil {
		id := p[0]
		p = p[1:]
		size := uleb()
		if size > uint64(len(p)) {
			return nil, nil, fmt.Errorf("section %d past end", id)
		}
		sec, rest := p[:size], p[size:]
		p = sec
		switch id {
		case 2: // imports
			for n := uleb(); n > 0 && err == nil; n-- {
				mod, field := name(), name()
				kind := p[0]
				p = p[1:]
				switch kind {
				case 0: // func: type index
					uleb()
				case 1: // table: reftype, limits
					p = p[1:]
					if flags := uleb(); flags&1 != 0 {
						uleb()
					}
					uleb()
				case 2: // memory: limits
					flags := uleb()
					uleb()
					if flags&1 != 0 {
						uleb()
					}
				case 3: // global: valtype, mut
					p = p[2:]
				}
				imports = append(imports, [2]string{mod, field})
			}
		case 7: // exports
			for n := uleb(); n > 0 && err == nil; n-- {
				exports = append(exports, name())
				p = p[1:]
				uleb()
			}
		}
		p = rest
	}
	return imports, exports, err
}
