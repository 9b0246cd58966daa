//go:build wasip1

package sdk

import (
	"runtime"
	"unsafe"
)

// The host functions of ABI.md, module sluice_transform_v1.

//go:wasmimport sluice_transform_v1 check_abi
func abiCheckABI(version int32) int32

//go:wasmimport sluice_transform_v1 next_batch
func abiNextBatch(buf unsafe.Pointer, capacity int32) int32

//go:wasmimport sluice_transform_v1 emit
func abiEmit(buf unsafe.Pointer, length int32) int32

//go:wasmimport sluice_transform_v1 fail
func abiFail(msg unsafe.Pointer, length int32)

// batch_source is minor version 2 of the ABI: a module imports it only if
// the transform calls Source (see batchSource).
//
//go:wasmimport sluice_transform_v1 batch_source
func abiBatchSource(buf unsafe.Pointer, capacity int32) int32

type wasmHost struct{}

func defaultHost() host { return wasmHost{} }

func (wasmHost) checkABI(version int32) int32 { return abiCheckABI(version) }

func (wasmHost) nextBatch(buf []byte) (int32, bool) {
	n := abiNextBatch(unsafe.Pointer(unsafe.SliceData(buf)), int32(len(buf)))
	runtime.KeepAlive(buf)
	return n, true
}

func (wasmHost) emit(buf []byte) int32 {
	rc := abiEmit(unsafe.Pointer(unsafe.SliceData(buf)), int32(len(buf)))
	runtime.KeepAlive(buf)
	return rc
}

func (wasmHost) fail(msg []byte) {
	abiFail(unsafe.Pointer(unsafe.SliceData(msg)), int32(len(msg)))
	runtime.KeepAlive(msg)
}

func (wasmHost) batchSource(buf []byte) int32 {
	n := abiBatchSource(unsafe.Pointer(unsafe.SliceData(buf)), int32(len(buf)))
	runtime.KeepAlive(buf)
	return n
}
