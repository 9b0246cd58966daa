// Command assignorplugin is the test assignor plugin of modules/groups. Its
// assignment is recognisable: every partition of a topic goes to the subscribed
// member with the smallest id. SLUICE_TEST_ASSIGNOR_MODE (or, when set and
// readable, the file SLUICE_TEST_ASSIGNOR_MODE_FILE, read at each call) picks the
// behaviour:
//
//	good             (default) the assignment above
//	invalid          an empty assignment (partitions unassigned: Check rejects it)
//	hang             never answers
//	exit-at-start    exits with status 3 before serving
//	crash-on-call    exits with status 4 inside Assign
//	error            returns an error
//	uniform          the built-in uniform assignor's answer (for benchmarks)
//
// SLUICE_TEST_ASSIGNOR_NAME sets the name it reports (default "smallest").
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	groupsassignor "github.com/sluicehq/sluice/modules/groups/assignor"
	"github.com/sluicehq/sluice/plugins/assignor"
)

type smallest struct{ name string }

func mode() string {
	if f := os.Getenv("SLUICE_TEST_ASSIGNOR_MODE_FILE"); f != "" {
		if b, err := os.ReadFile(f); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return os.Getenv("SLUICE_TEST_ASSIGNOR_MODE")
}

func (s smallest) Name() string { return s.name }

func (s smallest) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	switch mode() {
	case "invalid":
		return assignor.Assignment{}, nil
	case "hang":
		time.Sleep(time.Hour)
	case "crash-on-call":
		fmt.Fprintln(os.Stderr, "test plugin: crashing on call")
		os.Exit(4)
	case "error":
		return nil, errors.New("test plugin: asked to fail")
	case "uniform":
		return groupsassignor.Uniform{}.Assign(ctx, in)
	}
	members := slices.Clone(in.Members)
	slices.SortFunc(members, func(a, b assignor.Member) int { return strings.Compare(a.ID, b.ID) })
	out := assignor.Assignment{}
	for _, m := range members {
		out[m.ID] = map[assignor.TopicID][]int32{}
	}
	for id, t := range in.Topics {
		for _, m := range members {
			if !slices.Contains(m.Topics, t.Name) {
				continue
			}
			ps := make([]int32, t.Partitions)
			for p := range ps {
				ps[p] = int32(p)
			}
			out[m.ID][id] = ps
			break
		}
	}
	return out, nil
}

func main() {
	if mode() == "exit-at-start" {
		fmt.Fprintln(os.Stderr, "test plugin: exiting at start")
		os.Exit(3)
	}
	fmt.Fprintln(os.Stderr, "test plugin: starting")
	name := os.Getenv("SLUICE_TEST_ASSIGNOR_NAME")
	if name == "" {
		name = "smallest"
	}
	assignor.Serve(smallest{name: name})
}
