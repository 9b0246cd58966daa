package recordbatch

import "testing"

func TestDecoderSection(t *testing.T) {
	for _, codec := range []int{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		batch := Build(Options{Codec: codec, ProducerID: -1, BaseSequence: -1},
			Record{Key: []byte("k"), Value: []byte("v")}, Record{Value: []byte("w")})
		var d Decoder
		h, sec, err := d.Section(batch)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if h.RecordCount != 2 || len(sec) == 0 {
			t.Fatalf("codec %d: count %d, section %d bytes", codec, h.RecordCount, len(sec))
		}
		// The section re-framed with the header's codec bits cleared is a valid batch.
		plain := Build(Options{ProducerID: -1, BaseSequence: -1},
			Record{Key: []byte("k"), Value: []byte("v")}, Record{Value: []byte("w")})
		if string(plain[HeaderSize:]) != string(sec) {
			t.Fatalf("codec %d: section differs from the uncompressed records", codec)
		}
		bad := append([]byte(nil), batch...)
		bad[len(bad)-1] ^= 0xff
		if _, _, err := d.Section(bad); err == nil {
			t.Fatalf("codec %d: corrupt batch accepted", codec)
		}
	}
}
