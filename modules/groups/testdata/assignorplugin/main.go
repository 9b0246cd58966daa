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
//	uniform, range   the built-in assignor's answer (for benchmarks and the SDK's
//	                 assignortest.Suite run on the built-ins)
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
	case "uniform", "range":
		return builtin(ctx, mode(), in)
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

// builtin runs the broker's built-in assignor name on in. The SDK's types are its
// own, so in and the answer are converted here, as a plugin author delegating to
// their own library would (slices shared: the built-ins do not modify their input).
func builtin(ctx context.Context, name string, in assignor.Input) (assignor.Assignment, error) {
	if err := assignor.Validate(in); err != nil {
		return nil, err // the SDK's ErrInvalidInput, which the host recognises
	}
	var gin groupsassignor.Input
	for _, m := range in.Members {
		gm := groupsassignor.Member{ID: m.ID, InstanceID: m.InstanceID, Rack: m.Rack, Topics: m.Topics}
		for id, ps := range m.Current {
			if gm.Current == nil {
				gm.Current = map[groupsassignor.TopicID][]int32{}
			}
			gm.Current[groupsassignor.TopicID(id)] = ps
		}
		gin.Members = append(gin.Members, gm)
	}
	gin.Topics = make(map[groupsassignor.TopicID]groupsassignor.Topic, len(in.Topics))
	for id, t := range in.Topics {
		gin.Topics[groupsassignor.TopicID(id)] = groupsassignor.Topic{ID: groupsassignor.TopicID(t.ID), Name: t.Name, Partitions: t.Partitions,
			PartitionRacks: t.PartitionRacks, PartitionEndOffsets: t.PartitionEndOffsets, PartitionLag: t.PartitionLag}
	}
	gout, err := groupsassignor.Builtin(name).Assign(ctx, gin)
	if err != nil {
		return nil, err
	}
	out := make(assignor.Assignment, len(gout))
	for member, tps := range gout {
		out[member] = make(map[assignor.TopicID][]int32, len(tps))
		for id, ps := range tps {
			out[member][assignor.TopicID(id)] = ps
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
