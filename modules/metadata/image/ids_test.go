package image

// id is a test UUID, distinct per b.
func id(b byte) UUID { return UUID{0: b, 15: 7} }

func i32(v int32) *int32 { return &v }
