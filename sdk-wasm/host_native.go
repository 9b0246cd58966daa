//go:build !wasip1

package sdk

// Natively (not GOOS=wasip1) there is no broker to talk to: OnRecord and
// OnBatch panic. The package's tests drive the loop with a fake host instead,
// and transforms are best tested by calling their logic directly with a
// Record and a Writer of their own.

type nativeHost struct{}

func defaultHost() host { return nativeHost{} }

const nativeMsg = "sluice sdk: OnRecord and OnBatch only run inside the sluice broker: build with GOOS=wasip1 GOARCH=wasm"

func (nativeHost) checkABI(int32) int32           { panic(nativeMsg) }
func (nativeHost) nextBatch([]byte) (int32, bool) { panic(nativeMsg) }
func (nativeHost) emit([]byte) int32              { panic(nativeMsg) }
func (nativeHost) fail([]byte)                    { panic(nativeMsg) }
func (nativeHost) batchSource([]byte) int32       { panic(nativeMsg) }
