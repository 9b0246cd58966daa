package metadata

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/modules/metadata/image"
)

// TestForwardErrorCodes: a forwarded record's outcome comes back as an error that
// matches the same sentinel.
func TestForwardErrorCodes(t *testing.T) {
	for _, want := range forwardErrs[1:] {
		code := forwardCode(want)
		if err := forwardError(code, "x"); !errors.Is(err, want) {
			t.Errorf("code %d: %v does not match %v", code, err, want)
		}
	}
	if code := forwardCode(image.ErrTopicExists); code != 4 {
		t.Errorf("topic exists: code %d, want 4 (frozen)", code)
	}
	if err := forwardError(forwardCodeOther, "x"); err == nil {
		t.Error("unknown code: no error")
	}
}
