package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicUsage = `usage: sluice topic <command> [flags]

commands:
  create NAME... [-p PARTITIONS] [-r REPLICAS] [-c KEY=VALUE]...
                      create topics (-1: the broker's num.partitions and
                      default.replication.factor)
  list [--internal]   list topics with their partition and replica counts
  describe NAME...    partitions (leader, replicas, ISR, offsets) and configs
  delete NAME...      delete topics
  alter-config NAME... [--set KEY=VALUE]... [--delete KEY]...
                      change topic configs (incrementally: others stay)
  add-partitions NAME... --num N
                      add N partitions to each topic
  reassign NAME -p PARTITION:BROKER,BROKER... [-p ...] [--throttle B/s] [--no-wait] [--cancel]
  reassign NAME --clear-throttle
                      move partitions' replicas and wait until the move is done

` + kafkaHelp

func topicCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice topic", topicUsage, args, stdout, stderr, []command{
		{[]string{"create"}, cliRun("sluice topic create", topicCreate)},
		{[]string{"list", "ls"}, cliRun("sluice topic list", topicList)},
		{[]string{"describe"}, cliRun("sluice topic describe", topicDescribe)},
		{[]string{"delete"}, cliRun("sluice topic delete", topicDelete)},
		{[]string{"alter-config"}, cliRun("sluice topic alter-config", topicAlterConfig)},
		{[]string{"add-partitions"}, cliRun("sluice topic add-partitions", topicAddPartitions)},
		{[]string{"reassign", "move"}, cliRun("sluice topic reassign", topicReassign)},
	})
}

// cliRun adapts a command that returns an error to the command table.
func cliRun(prog string, fn func(prog string, args []string, stdout, stderr io.Writer) error) func([]string, io.Writer, io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		return exitCode(stderr, prog, fn(prog, args, stdout, stderr))
	}
}

// failed is the error of a command some of whose items failed (each printed).
func failed(n int, what string) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d %s failed", n, what)
}

func topicCreate(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" NAME... [-p PARTITIONS] [-r REPLICAS] [-c KEY=VALUE]...\n", stderr)
	var partitions, replicas int
	var configs keyValues
	fs.IntVar(&partitions, "partitions", -1, "partitions per topic (-1: num.partitions)")
	fs.IntVar(&partitions, "p", -1, "shorthand for --partitions")
	fs.IntVar(&replicas, "replicas", -1, "replication factor (-1: default.replication.factor)")
	fs.IntVar(&replicas, "r", -1, "shorthand for --replicas")
	fs.Var(&configs, "config", "topic config KEY=VALUE (repeatable)")
	fs.Var(&configs, "c", "shorthand for --config")
	names, err := kf.parse(fs, args, 1, -1, "topic name")
	if err != nil {
		return err
	}
	pairs, err := configs.pairs("--config")
	if err != nil {
		return err
	}
	cfg := map[string]*string{}
	for _, p := range pairs {
		cfg[p[0]] = &p[1]
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.CreateTopics(ctx, int32(partitions), int16(replicas), cfg, names...)
	if err != nil {
		return err
	}
	type row struct {
		Topic      string `json:"topic"`
		ID         string `json:"id,omitempty"`
		Partitions int32  `json:"partitions"`
		Replicas   int16  `json:"replication_factor"`
		Error      string `json:"error,omitempty"`
	}
	var rows []row
	bad := 0
	for _, name := range names {
		r := res[name]
		rw := row{Topic: name, Partitions: r.NumPartitions, Replicas: r.ReplicationFactor, Error: errWithMessage(r.Err, r.ErrMessage)}
		if r.Err == nil {
			rw.ID = topicID(r.ID)
		} else {
			bad++
		}
		rows = append(rows, rw)
	}
	if kf.json {
		if err := printJSON(stdout, rows); err != nil {
			return err
		}
	} else {
		t := newTable(stdout, "TOPIC", "STATUS")
		for _, r := range rows {
			status := "created"
			if r.Error != "" {
				status = r.Error
			}
			t.row(r.Topic, status)
		}
		t.flush()
	}
	return failed(bad, "topic creations")
}

func topicList(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" [--internal]\n", stderr)
	internal := fs.Bool("internal", false, "include internal topics (__consumer_offsets, ...)")
	_, err := kf.parse(fs, args, 0, 0, "")
	if err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	var topics kadm.TopicDetails
	if *internal {
		topics, err = adm.ListTopicsWithInternal(ctx)
	} else {
		topics, err = adm.ListTopics(ctx)
	}
	if err != nil {
		return err
	}
	type row struct {
		Topic      string `json:"topic"`
		ID         string `json:"id"`
		Partitions int    `json:"partitions"`
		Replicas   int    `json:"replication_factor"`
		Internal   bool   `json:"internal,omitempty"`
		Error      string `json:"error,omitempty"`
	}
	rows := []row{}
	for _, td := range topics.Sorted() {
		rows = append(rows, row{Topic: td.Topic, ID: topicID(td.ID), Partitions: len(td.Partitions),
			Replicas: td.Partitions.NumReplicas(), Internal: td.IsInternal, Error: errString(td.Err)})
	}
	if kf.json {
		return printJSON(stdout, rows)
	}
	t := newTable(stdout, "NAME", "PARTITIONS", "REPLICAS")
	for _, r := range rows {
		t.row(r.Topic, r.Partitions, r.Replicas)
	}
	t.flush()
	return nil
}

func topicDescribe(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" NAME... [--all-configs]\n", stderr)
	allConfigs := fs.Bool("all-configs", false, "print every config, not only the topic's own settings")
	names, err := kf.parse(fs, args, 1, -1, "topic name")
	if err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(3)
	if err != nil {
		return err
	}
	defer done()
	topics, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return err
	}
	starts, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return err
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return err
	}
	type partRow struct {
		Partition   int32   `json:"partition"`
		Leader      int32   `json:"leader"`
		LeaderEpoch int32   `json:"leader_epoch"`
		Replicas    []int32 `json:"replicas"`
		ISR         []int32 `json:"isr"`
		Offline     []int32 `json:"offline_replicas,omitempty"`
		LogStart    int64   `json:"log_start_offset"`
		LogEnd      int64   `json:"log_end_offset"`
		Error       string  `json:"error,omitempty"`
	}
	type cfgRow struct {
		Name   string `json:"name"`
		Value  string `json:"value"`
		Source string `json:"source"`
	}
	type topicOut struct {
		Topic      string    `json:"topic"`
		ID         string    `json:"id"`
		Internal   bool      `json:"internal"`
		Partitions []partRow `json:"partitions"`
		Configs    []cfgRow  `json:"configs"`
		Error      string    `json:"error,omitempty"`
	}
	var out []topicOut
	bad := 0
	for _, name := range names {
		td, ok := topics[name]
		to := topicOut{Topic: name, Partitions: []partRow{}, Configs: []cfgRow{}}
		if !ok || td.Err != nil {
			if ok {
				to.Error = errString(td.Err)
			} else {
				to.Error = "no such topic"
			}
			bad++
			out = append(out, to)
			continue
		}
		to.ID, to.Internal = topicID(td.ID), td.IsInternal
		for _, pd := range td.Partitions.Sorted() {
			pr := partRow{Partition: pd.Partition, Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch, Replicas: pd.Replicas,
				ISR: pd.ISR, Offline: pd.OfflineReplicas, LogStart: -1, LogEnd: -1, Error: errString(pd.Err)}
			if o, ok := starts.Lookup(name, pd.Partition); ok && o.Err == nil {
				pr.LogStart = o.Offset
			}
			if o, ok := ends.Lookup(name, pd.Partition); ok && o.Err == nil {
				pr.LogEnd = o.Offset
			}
			to.Partitions = append(to.Partitions, pr)
		}
		for _, rc := range configs {
			if rc.Name != name {
				continue
			}
			for _, c := range rc.Configs {
				if !*allConfigs && c.Source != kmsg.ConfigSourceDynamicTopicConfig { // set on the topic
					continue
				}
				to.Configs = append(to.Configs, cfgRow{Name: c.Key, Value: c.MaybeValue(), Source: c.Source.String()})
			}
		}
		slices.SortFunc(to.Configs, func(a, b cfgRow) int {
			if a.Name < b.Name {
				return -1
			}
			if a.Name > b.Name {
				return 1
			}
			return 0
		})
		out = append(out, to)
	}
	if kf.json {
		if err := printJSON(stdout, out); err != nil {
			return err
		}
		return failed(bad, "topic descriptions")
	}
	for i, to := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if to.Error != "" {
			fmt.Fprintf(stdout, "TOPIC %s: %s\n", to.Topic, to.Error)
			continue
		}
		t := newTable(stdout)
		t.row("NAME", to.Topic)
		t.row("ID", to.ID)
		t.row("INTERNAL", to.Internal)
		t.row("PARTITIONS", len(to.Partitions))
		t.flush()
		if len(to.Configs) > 0 {
			fmt.Fprintln(stdout, "\nCONFIGS")
			t = newTable(stdout, "KEY", "VALUE", "SOURCE")
			for _, c := range to.Configs {
				t.row(c.Name, c.Value, c.Source)
			}
			t.flush()
		}
		fmt.Fprintln(stdout)
		t = newTable(stdout, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "LOG-START-OFFSET", "LOG-END-OFFSET")
		for _, p := range to.Partitions {
			t.row(p.Partition, p.Leader, p.LeaderEpoch, int32List(p.Replicas), int32List(p.ISR), int32List(p.Offline), p.LogStart, p.LogEnd)
		}
		t.flush()
	}
	return failed(bad, "topic descriptions")
}

func topicDelete(prog string, args []string, stdout, stderr io.Writer) error {
	return deleteNamed(prog, args, stdout, stderr, "topic", "TOPIC", "topic deletions",
		func(ctx context.Context, adm *adminConn, names []string) (kadm.DeleteTopicResponses, error) {
			return adm.DeleteTopics(ctx, names...)
		}, func(r kadm.DeleteTopicResponse) (string, error) { return r.ErrMessage, r.Err })
}

// deleteNamed is a delete command of named things (topics, groups): one status line
// per name, exit 1 when any failed.
func deleteNamed[T any, M ~map[string]T](prog string, args []string, stdout, stderr io.Writer, kind, col, what string,
	del func(context.Context, *adminConn, []string) (M, error), get func(T) (string, error)) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" "+strings.ToUpper(kind)+"...\n", stderr)
	names, err := kf.parse(fs, args, 1, -1, kind+" name")
	if err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	res, err := del(ctx, adm, names)
	if err != nil {
		return err
	}
	return printStatuses(stdout, kf.json, col, "deleted", names, func(n string) error {
		return entryErr(map[string]T(res), n, kind, get)
	}, what)
}

// printStatuses prints one status per name (done or the error) and fails when any
// failed.
func printStatuses(stdout io.Writer, asJSON bool, col, done string, names []string, errOf func(string) error, what string) error {
	type row struct {
		Name  string `json:"name"`
		Error string `json:"error,omitempty"`
	}
	var rows []row
	bad := 0
	for _, n := range names {
		err := errOf(n)
		if err != nil {
			bad++
		}
		rows = append(rows, row{Name: n, Error: errString(err)})
	}
	if asJSON {
		if err := printJSON(stdout, rows); err != nil {
			return err
		}
	} else {
		t := newTable(stdout, col, "STATUS")
		for _, r := range rows {
			status := done
			if r.Error != "" {
				status = r.Error
			}
			t.row(r.Name, status)
		}
		t.flush()
	}
	return failed(bad, what)
}

func topicAlterConfig(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" NAME... [--set KEY=VALUE]... [--delete KEY]...\n", stderr)
	var sets, dels keyValues
	fs.Var(&sets, "set", "set a config KEY=VALUE (repeatable)")
	fs.Var(&dels, "delete", "remove the topic's setting KEY, back to the default (repeatable)")
	names, err := kf.parse(fs, args, 1, -1, "topic name")
	if err != nil {
		return err
	}
	pairs, err := sets.pairs("--set")
	if err != nil {
		return err
	}
	if len(pairs) == 0 && len(dels) == 0 {
		return usageError{"nothing to change: give --set KEY=VALUE or --delete KEY"}
	}
	var alter []kadm.AlterConfig
	for _, p := range pairs {
		alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: p[0], Value: &p[1]})
	}
	for _, k := range dels {
		alter = append(alter, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.AlterTopicConfigs(ctx, alter, names...)
	if err != nil {
		return err
	}
	errs := map[string]error{}
	for _, r := range res {
		if r.Err != nil {
			errs[r.Name] = errors.New(errWithMessage(r.Err, r.ErrMessage))
		} else {
			errs[r.Name] = nil
		}
	}
	return printStatuses(stdout, kf.json, "TOPIC", "altered", names, func(n string) error {
		err, ok := errs[n]
		if !ok {
			return errors.New("no answer for this topic")
		}
		return err
	}, "config changes")
}

func topicAddPartitions(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" NAME... --num N\n", stderr)
	num := fs.Int("num", 0, "partitions to add to each topic")
	fs.IntVar(num, "n", 0, "shorthand for --num")
	names, err := kf.parse(fs, args, 1, -1, "topic name")
	if err != nil {
		return err
	}
	if *num <= 0 {
		return usageError{"--num must be a positive number of partitions to add, got " + strconv.Itoa(*num)}
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	res, err := adm.CreatePartitions(ctx, *num, names...)
	if err != nil {
		return err
	}
	return printStatuses(stdout, kf.json, "TOPIC", fmt.Sprintf("added %d", *num), names, func(n string) error {
		return entryErr(res, n, "topic", func(r kadm.CreatePartitionsResponse) (string, error) { return r.ErrMessage, r.Err })
	}, "partition additions")
}
