package wasm

import (
	"encoding/binary"
	"errors"
)

// Stopping a running guest.
//
// wazero's WithCloseOnContextDone makes a module stoppable by compiling, at
// every loop header, a call that leaves the compiled code for Go, which checks
// whether the module was closed: ~80 ns each time. Go's wasm backend compiles
// every iteration of every Go loop as a branch back to a wasm loop, so a Go
// guest pays it per loop iteration (a byte-copying loop: 88 ns a byte instead
// of 4).
//
// Instead, instrumentDeadline adds two i32 globals, $fuel and $stop (exported
// as deadlineExport), and at the start of every loop body
//
//	global.get $fuel
//	i32.eqz
//	if
//	  i32.const 0
//	  memory.grow      ;; a call into Go: a preemption point
//	  drop
//	  global.get $stop
//	  if
//	    unreachable
//	  end
//	  i32.const fuelPerYield
//	  global.set $fuel
//	end
//	global.get $fuel
//	i32.const 1
//	i32.sub
//	global.set $fuel
//
// The host sets $stop to 1 to stop the instance (its context is cancelled:
// batch timeout, discard, pool close): the guest traps within fuelPerYield
// loop iterations. The exit to Go every fuelPerYield iterations matters as
// much: compiled wasm cannot be preempted by the Go runtime, so a guest that
// never leaves it would block every stop-the-world phase of the process's
// garbage collector (and so the whole broker) for as long as it runs.
// memory.grow with 0 pages is one of the instructions wazero implements in
// Go; it changes nothing. A guest that does not loop ends its current call on
// its own (recursion ends in a stack overflow), and a guest blocked in
// next_batch is stopped by the host function.
//
// Modules using instructions the rewriter does not know (SIMD, threads,
// exceptions, GC types, multi-memory, memory64), or without a memory, are left
// alone and compiled with WithCloseOnContextDone.

// fuelPerYield is the number of loop iterations between exits to Go.
const fuelPerYield = 4096

// deadlineExport is the name of the global instrumentDeadline adds.
const deadlineExport = "__sluice_stop"

var errUninstrumentable = errors.New("module not instrumentable")

// instrumentDeadline returns wasm with the stop global and the loop checks
// (see above), or errUninstrumentable.
func instrumentDeadline(wasm []byte) (out []byte, err error) {
	defer func() {
		// Malformed input that slips past the checks below: the caller
		// compiles the original, and wazero reports what is wrong with it.
		if r := recover(); r != nil {
			out, err = nil, errUninstrumentable
		}
	}()
	if len(wasm) < 8 || binary.LittleEndian.Uint32(wasm[4:]) != 1 {
		return nil, errUninstrumentable
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := &reader{b: wasm, i: 8}
	for r.i < len(wasm) {
		id := r.byte()
		n := r.u32()
		secs = append(secs, section{id, r.take(int(n))})
	}
	var importedGlobals, definedGlobals uint32
	globalSec, exportSec, codeSec, memory := -1, -1, -1, false
	for k, s := range secs {
		switch s.id {
		case 2:
			importedGlobals = countGlobalImports(s.body)
		case 5:
			memory = (&reader{b: s.body}).u32() == 1
		case 6:
			globalSec = k
			definedGlobals = (&reader{b: s.body}).u32()
		case 7:
			exportSec = k
		case 10:
			codeSec = k
		}
	}
	if globalSec < 0 || exportSec < 0 || codeSec < 0 || !memory {
		return nil, errUninstrumentable
	}
	idx := importedGlobals + definedGlobals // $stop; $fuel is idx+1

	// i32, mutable, init i32.const 0 ($stop) and fuelPerYield ($fuel)
	g := &reader{b: secs[globalSec].body}
	g.u32()
	body := binary.AppendUvarint(nil, uint64(definedGlobals+2))
	body = append(body, g.b[g.i:]...)
	body = append(body, 0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41)
	body = appendSleb(body, fuelPerYield)
	secs[globalSec].body = append(body, 0x0b)

	e := &reader{b: secs[exportSec].body}
	ne := e.u32()
	entries := e.i
	for range ne {
		if string(e.take(int(e.u32()))) == deadlineExport {
			return nil, errUninstrumentable
		}
		e.byte()
		e.u32()
	}
	body = binary.AppendUvarint(nil, uint64(ne+1))
	body = append(body, e.b[entries:]...)
	body = binary.AppendUvarint(body, uint64(len(deadlineExport)))
	body = append(body, deadlineExport...)
	secs[exportSec].body = append(body, 0x03)
	secs[exportSec].body = binary.AppendUvarint(secs[exportSec].body, uint64(idx))

	stop := binary.AppendUvarint(nil, uint64(idx))
	fuel := binary.AppendUvarint(nil, uint64(idx+1))
	var check []byte
	check = append(append(append(check, 0x23), fuel...), 0x45, 0x04, 0x40) // global.get $fuel; i32.eqz; if
	check = append(check, 0x41, 0x00, 0x40, 0x00, 0x1a)                    // i32.const 0; memory.grow; drop
	check = append(append(append(check, 0x23), stop...), 0x04, 0x40, 0x00, 0x0b)
	check = appendSleb(append(check, 0x41), fuelPerYield)
	check = append(append(append(check, 0x24), fuel...), 0x0b) // global.set $fuel; end
	check = append(append(check, 0x23), fuel...)
	check = append(check, 0x41, 0x01, 0x6b, 0x24) // i32.const 1; i32.sub; global.set
	check = append(check, fuel...)
	code, err := instrumentCode(secs[codeSec].body, check)
	if err != nil {
		return nil, err
	}
	secs[codeSec].body = code

	out = append(make([]byte, 0, len(wasm)+len(wasm)/8), wasm[:8]...)
	for _, s := range secs {
		out = append(out, s.id)
		out = binary.AppendUvarint(out, uint64(len(s.body)))
		out = append(out, s.body...)
	}
	return out, nil
}

func countGlobalImports(b []byte) uint32 {
	r := &reader{b: b}
	var n uint32
	for range r.u32() {
		r.take(int(r.u32()))
		r.take(int(r.u32()))
		switch r.byte() {
		case 0x00: // func
			r.u32()
		case 0x01: // table
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.byte()
			r.byte()
			n++
		default:
			panic(errUninstrumentable)
		}
	}
	return n
}

// instrumentCode inserts check after the block type of every loop of every
// function body of a code section.
func instrumentCode(sec []byte, check []byte) ([]byte, error) {
	r := &reader{b: sec}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(sec)+len(sec)/8), uint64(n))
	var fn []byte
	for range n {
		size := r.u32()
		body := r.take(int(size))
		fn = fn[:0]
		f := &reader{b: body}
		for range f.u32() { // locals
			f.u32()
			if t := f.byte(); t < 0x7b || t > 0x7f {
				if t != 0x70 && t != 0x6f {
					return nil, errUninstrumentable
				}
			}
		}
		last := 0
		for f.i < len(body) {
			op := f.byte()
			switch {
			case op == 0x03: // loop bt
				f.sleb()
				fn = append(fn, body[last:f.i]...)
				fn = append(fn, check...)
				last = f.i
			case op == 0x02, op == 0x04: // block, if
				f.sleb()
			case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1:
			case op == 0x0c, op == 0x0d, op == 0x10, op == 0x12, op == 0xd2,
				op >= 0x20 && op <= 0x26, op == 0x3f, op == 0x40:
				f.u32()
			case op == 0x0e: // br_table
				for range f.u32() {
					f.u32()
				}
				f.u32()
			case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
				f.u32()
				f.u32()
			case op == 0x1c: // select t*
				for range f.u32() {
					f.byte()
				}
			case op >= 0x28 && op <= 0x3e: // memarg
				if f.u32()&0x40 != 0 { // multi-memory
					return nil, errUninstrumentable
				}
				f.u32()
			case op == 0x41, op == 0x42:
				f.sleb()
			case op == 0x43:
				f.take(4)
			case op == 0x44:
				f.take(8)
			case op >= 0x45 && op <= 0xc4:
			case op == 0xd0:
				f.byte()
			case op == 0xfc:
				switch sub := f.u32(); {
				case sub <= 7:
				case sub == 8, sub == 10, sub == 12, sub == 14:
					f.u32()
					f.u32()
				case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
					f.u32()
				default:
					return nil, errUninstrumentable
				}
			default:
				return nil, errUninstrumentable
			}
		}
		fn = append(fn, body[last:]...)
		out = binary.AppendUvarint(out, uint64(len(fn)))
		out = append(out, fn...)
	}
	if r.i != len(sec) {
		return nil, errUninstrumentable
	}
	return out, nil
}

// reader reads a wasm binary; it panics (errUninstrumentable) past the end.
type reader struct {
	b []byte
	i int
}

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		panic(errUninstrumentable)
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *reader) take(n int) []byte {
	if n < 0 || n > len(r.b)-r.i {
		panic(errUninstrumentable)
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s
}

func (r *reader) u32() uint32 {
	v, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 || n > 5 || v > 1<<32-1 {
		panic(errUninstrumentable)
	}
	r.i += n
	return uint32(v)
}

// sleb skips a signed LEB128 (block types, constants; at most 10 bytes).
func (r *reader) sleb() {
	for k := 0; ; k++ {
		if k == 10 {
			panic(errUninstrumentable)
		}
		if r.byte()&0x80 == 0 {
			return
		}
	}
}

func (r *reader) limits() {
	flags := r.byte()
	if flags&0x04 != 0 { // memory64
		panic(errUninstrumentable)
	}
	r.u32()
	if flags&0x01 != 0 {
		r.u32()
	}
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
