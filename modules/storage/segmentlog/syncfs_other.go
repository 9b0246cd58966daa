//go:build !linux

package segmentlog

import (
	"errors"
	"os"
)

// fsSync has no whole-file-system sync here: an orderly stop fsyncs each file.
type fsSync struct{}

func openFSSync(string) (*fsSync, error) { return nil, nil }

func (*fsSync) sameFS(os.FileInfo) bool { return false }
func (*fsSync) sync() error             { return errors.ErrUnsupported }
func (*fsSync) close() error            { return nil }
