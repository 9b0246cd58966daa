package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// ABI identifies the guest ABI a module was built for, by its import module.
type ABI string

const (
	// ABISluiceV1 is our ABI (sdk-wasm/ABI.md).
	ABISluiceV1 ABI = "sluice_transform_v1"
	// ABIRedpanda is Redpanda's data transform ABI (check_abi_version_2).
	ABIRedpanda ABI = "redpanda_transform"
)

const (
	wasiModule = "wasi_snapshot_preview1"
	srModule   = "redpanda_schema_registry"

	// DefaultMemoryLimitPages is the memory limit Compile uses for 0 (128 MiB).
	DefaultMemoryLimitPages = 2048
	maxMemoryPages          = 65536
)

// Engine compiles transform modules. Compiled code is shared by all the
// programs of an engine (and cached on disk when a cache directory is given).
type Engine struct {
	cache wazero.CompilationCache

	mu     sync.Mutex
	closed bool
	progs  map[*Program]struct{}
}

// NewEngine returns an engine. With cacheDir != "", compiled code is also kept
// in that directory across restarts.
func NewEngine(ctx context.Context, cacheDir string) (*Engine, error) {
	var cache wazero.CompilationCache
	if cacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm compilation cache %s: %w", cacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	return &Engine{cache: cache, progs: map[*Program]struct{}{}}, nil
}

// Close closes the engine's programs (and so their instances) and its cache.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	progs := make([]*Program, 0, len(e.progs))
	for p := range e.progs {
		progs = append(progs, p)
	}
	e.mu.Unlock()
	var errs []error
	for _, p := range progs {
		errs = append(errs, p.Close(ctx))
	}
	errs = append(errs, e.cache.Close(ctx))
	return errors.Join(errs...)
}

// Program is a compiled, validated transform module, ready to be
// instantiated by pools. Its memory limit is fixed at Compile.
type Program struct {
	engine   *Engine
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	abi      ABI
	// stoppable: the module was instrumented (deadline.go) and is stopped
	// through its stop global rather than wazero's WithCloseOnContextDone.
	stoppable bool

	mu     sync.Mutex
	closed bool
}

// ABI returns the guest ABI the module imports.
func (p *Program) ABI() ABI { return p.abi }

// Close releases the program. Instances still running in its pools are ended
// (their batches fail); close pools first.
func (p *Program) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.engine.mu.Lock()
	delete(p.engine.progs, p)
	p.engine.mu.Unlock()
	return p.rt.Close(ctx)
}

var wasmMagic = []byte{0x00, 'a', 's', 'm'}

// Compile validates and compiles a transform module, with a linear memory
// limit of memoryLimitPages 64 KiB pages (0: DefaultMemoryLimitPages). It
// refuses, with ErrInvalidModule: bytes that are not WebAssembly; a module
// without a _start function or memory export; a module importing neither
// sluice_transform_v1 nor redpanda_transform (or both); imports from any other
// module than those, wasi_snapshot_preview1 and redpanda_schema_registry;
// unknown imported functions, imported functions with the wrong signature, and
// imported memories.
func (e *Engine) Compile(ctx context.Context, wasm []byte, memoryLimitPages uint32) (*Program, error) {
	if memoryLimitPages == 0 {
		memoryLimitPages = DefaultMemoryLimitPages
	}
	if memoryLimitPages > maxMemoryPages {
		return nil, fmt.Errorf("wasm: memory limit %d pages exceeds %d", memoryLimitPages, maxMemoryPages)
	}
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], wasmMagic) {
		return nil, invalid("not a WebAssembly binary")
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}

	// See deadline.go: an instrumented module is stopped by a global the
	// host sets, which costs far less than wazero's check per loop iteration.
	instrumented, ierr := instrumentDeadline(wasm)
	stoppable := ierr == nil
	if stoppable {
		wasm = instrumented
	}
	cfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(memoryLimitPages).
		WithCloseOnContextDone(!stoppable).
		WithCompilationCache(e.cache)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	p := &Program{engine: e, rt: rt, stoppable: stoppable}
	ok := false
	defer func() {
		if !ok {
			_ = rt.Close(ctx)
		}
	}()
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, fmt.Errorf("wasm: instantiate wasi: %w", err)
	}
	if err := instantiateHostModules(ctx, rt); err != nil {
		return nil, fmt.Errorf("wasm: instantiate host modules: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if p.abi, err = validate(rt, compiled); err != nil {
		return nil, err
	}
	p.compiled = compiled

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	e.progs[p] = struct{}{}
	ok = true
	return p, nil
}

// validate checks a compiled module's exports and imports against the host
// modules instantiated in rt, and returns the guest's ABI.
func validate(rt wazero.Runtime, m wazero.CompiledModule) (ABI, error) {
	if _, ok := m.ExportedFunctions()["_start"]; !ok {
		return "", invalid("no _start export (build a WASI command module)")
	}
	if _, ok := m.ExportedMemories()["memory"]; !ok {
		return "", invalid("no memory export")
	}
	if mems := m.ImportedMemories(); len(mems) > 0 {
		mod, name, _ := mems[0].Import()
		return "", invalid("imports memory %s.%s", mod, name)
	}
	var sluice, redpanda bool
	for _, f := range m.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case string(ABISluiceV1):
			sluice = true
		case string(ABIRedpanda):
			redpanda = true
		case wasiModule, srModule:
		default:
			return "", invalid("imports %s.%s from unknown module %q", mod, name, mod)
		}
		host := rt.Module(mod)
		if host == nil {
			return "", invalid("imports %s.%s from unknown module %q", mod, name, mod)
		}
		def, ok := host.ExportedFunctionDefinitions()[name]
		if !ok {
			return "", invalid("imports unknown function %s.%s", mod, name)
		}
		if !slices.Equal(def.ParamTypes(), f.ParamTypes()) || !slices.Equal(def.ResultTypes(), f.ResultTypes()) {
			return "", invalid("import %s.%s has signature %s, want %s", mod, name, signature(f), signature(def))
		}
	}
	switch {
	case sluice && redpanda:
		return "", invalid("imports both %s and %s", ABISluiceV1, ABIRedpanda)
	case sluice:
		return ABISluiceV1, nil
	case redpanda:
		return ABIRedpanda, nil
	}
	return "", invalid("imports neither %s nor %s", ABISluiceV1, ABIRedpanda)
}

func signature(f api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		s := "("
		for i, t := range ts {
			if i > 0 {
				s += ", "
			}
			s += api.ValueTypeName(t)
		}
		return s + ")"
	}
	return names(f.ParamTypes()) + " -> " + names(f.ResultTypes())
}

// instantiateHostModules adds our host modules to rt.
func instantiateHostModules(ctx context.Context, rt wazero.Runtime) error {
	for _, m := range []struct {
		name  string
		funcs []hostFunc
	}{
		{string(ABISluiceV1), sluiceFuncs},
		{string(ABIRedpanda), redpandaFuncs},
		{srModule, schemaRegistryFuncs},
	} {
		b := rt.NewHostModuleBuilder(m.name)
		for _, f := range m.funcs {
			b.NewFunctionBuilder().
				WithGoModuleFunction(f.fn, f.params, f.results).
				WithName(f.name).
				Export(f.name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return nil
}

// hostFunc is one imported function of a host module.
type hostFunc struct {
	name            string
	params, results []api.ValueType
	fn              api.GoModuleFunc
}

const i32 = api.ValueTypeI32

func types(ts ...api.ValueType) []api.ValueType { return ts }
