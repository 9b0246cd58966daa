package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/segmentlog"
)

const logUsage = `usage:
  sluice log verify [--repair] DIR

Checks a data dir (or one partition directory, "<topic>-<partition>") offline: every
segment's batches (framing, offsets increasing, CRC-32C) and its offset and time
indexes. Prints one line per damaged segment (file, byte position, offsets lost) or
index problem, then a summary. Exit status: 0 clean, 1 damage found, 2 usage or I/O
error.

--repair cuts each damaged segment at its first bad batch: the bytes from there, and
every later segment of the partition, are moved to *.damaged files (nothing is
deleted), and the indexes of cut segments and damaged indexes are removed (the broker
rebuilds them at its next start). It refuses to run while a broker holds the data
dir's lock. Exit status 1 still reports that damage was found.
`

func logCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice log", logUsage, args, stdout, stderr, []command{
		{[]string{"verify"}, logVerify},
	})
}

func logVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("log verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repair := fs.Bool("repair", false, "cut damaged segments at the first bad batch (see sluice log help)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, logUsage)
		return 2
	}
	dir := filepath.Clean(fs.Arg(0))
	if st, err := os.Stat(dir); err != nil {
		fmt.Fprintf(stderr, "sluice log verify: %v\n", err)
		return 2
	} else if !st.IsDir() {
		fmt.Fprintf(stderr, "sluice log verify: %s is not a directory\n", dir)
		return 2
	}
	parts, lockDir := []string{dir}, filepath.Dir(dir)
	if !segmentlog.IsPartitionDir(dir) {
		var err error
		if parts, err = segmentlog.PartitionDirs(dir); err != nil {
			fmt.Fprintf(stderr, "sluice log verify: %v\n", err)
			return 2
		}
		lockDir = dir
	}
	// The broker's lock: --repair must hold it (created when missing, so a broker
	// cannot start on the dir meanwhile); a plain check only warns when a broker runs
	// (its active segments may change under the check).
	_, lerr := os.Stat(filepath.Join(lockDir, ".lock"))
	if *repair || lerr == nil {
		unlock, err := kernel.LockDataDir(lockDir)
		switch {
		case err != nil && *repair:
			fmt.Fprintf(stderr, "sluice log verify: refusing --repair: %v\n", err)
			return 2
		case err != nil:
			fmt.Fprintf(stderr, "sluice log verify: warning: %v; segments being written may be reported as damaged\n", err)
		default:
			defer unlock()
		}
	}
	var (
		damaged, indexes, segs int
		bytes                  int64
		ioErr                  bool
	)
	for _, p := range parts {
		var cut *segmentlog.Problem
		var badIdx []string
		vs, err := segmentlog.VerifyPartition(p, func(pr segmentlog.Problem) {
			if pr.Batch {
				damaged++
				fmt.Fprintf(stdout, "damaged: %s\n", pr)
				if cut == nil {
					c := pr
					cut = &c
				}
				return
			}
			indexes++
			fmt.Fprintf(stdout, "index: %s\n", pr)
			if !strings.HasSuffix(pr.File, ".log") {
				badIdx = append(badIdx, pr.File)
			}
		})
		segs += vs.Segments
		bytes += vs.Bytes
		if err != nil {
			fmt.Fprintf(stderr, "sluice log verify: %s: %v\n", p, err)
			ioErr = true
			continue
		}
		if !*repair {
			continue
		}
		for _, f := range badIdx {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(stderr, "sluice log verify: repair: %v\n", err)
				ioErr = true
			}
		}
		if cut != nil {
			if err := segmentlog.CutDamage(p, *cut); err != nil {
				fmt.Fprintf(stderr, "sluice log verify: repair %s: %v\n", p, err)
				ioErr = true
				continue
			}
			fmt.Fprintf(stdout, "repaired: %s cut at position %d; later bytes and segments moved to *.damaged\n", cut.File, cut.Position)
		}
	}
	fmt.Fprintf(stdout, "checked %d partitions, %d segments, %d bytes: %d damaged segments, %d index problems\n",
		len(parts), segs, bytes, damaged, indexes)
	switch {
	case ioErr:
		return 2
	case damaged+indexes > 0:
		return 1
	}
	return 0
}
