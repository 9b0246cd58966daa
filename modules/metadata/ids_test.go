package metadata

import "github.com/sluicehq/sluice/modules/metadata/image"

// id is a test UUID, distinct per b.
func id(b byte) image.UUID { return image.UUID{0: b, 15: 7} }
