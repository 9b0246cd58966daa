package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/clusterview"
)

const clusterUsage = `usage: sluice cluster <command> [flags]

commands:
  info     the cluster id, the controller and each broker (address, rack, leaders)
  health   under-replicated, under-min-ISR and offline partitions; exit status 1
           when any partition is offline or under-replicated
  features the feature levels: what the broker supports, what the cluster finalized
  upgrade FEATURE=LEVEL...      raise finalized levels (--dry-run: only check)
  downgrade FEATURE=LEVEL...    lower them, 0 turns a feature off (--unsafe, --dry-run)
  unregister BROKER_ID...       remove stopped brokers' registrations for good
  quorum   the metadata quorum: the controller, voters and observers, their lag
  add-voter NODE_ID...          make brokers that follow the log voters (KIP-853)
  remove-voter NODE_ID...       take voters out of the quorum; live ones stay observers

` + kafkaHelp

func clusterCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice cluster", clusterUsage, args, stdout, stderr, []command{
		{[]string{"info"}, cliRun("sluice cluster info", clusterInfo)},
		{[]string{"health"}, cliRun("sluice cluster health", clusterHealth)},
		{[]string{"features"}, cliRun("sluice cluster features", clusterFeatures)},
		{[]string{"upgrade"}, cliRun("sluice cluster upgrade", clusterUpgrade)},
		{[]string{"downgrade"}, cliRun("sluice cluster downgrade", clusterDowngrade)},
		{[]string{"unregister"}, cliRun("sluice cluster unregister", clusterUnregister)},
		{[]string{"quorum"}, cliRun("sluice cluster quorum", clusterQuorum)},
		{[]string{"add-voter"}, cliRun("sluice cluster add-voter", clusterAddVoter)},
		{[]string{"remove-voter"}, cliRun("sluice cluster remove-voter", clusterRemoveVoter)},
	})
}

// clusterView is what info and health start from: the cluster as one broker
// describes it now (DescribeCluster: the controller as the brokers know it, not a
// client's cached metadata) and the topics' metadata.
type clusterView struct {
	kf   *kafkaFlags
	ctx  context.Context
	adm  *adminConn
	dc   *kmsg.DescribeClusterResponse
	md   kadm.Metadata
	done func()
}

// openClusterView parses a command without arguments, connects (spans request
// timeouts) and loads the view; the caller defers v.done.
func openClusterView(prog string, args []string, stderr io.Writer, spans int) (*clusterView, error) {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+"\n", stderr)
	if _, err := kf.parse(fs, args, 0, 0, ""); err != nil {
		return nil, err
	}
	ctx, adm, done, err := kf.connect(spans)
	if err != nil {
		return nil, err
	}
	v := &clusterView{kf: kf, ctx: ctx, adm: adm, done: done}
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, adm.kgo)
	if err == nil {
		err = kerrOf(resp.ErrorCode, resp.ErrorMessage)
	}
	if err == nil {
		v.dc = resp
		v.md, err = adm.Metadata(ctx)
	}
	if err != nil {
		done()
		return nil, err
	}
	return v, nil
}

func clusterInfo(prog string, args []string, stdout, stderr io.Writer) error {
	v, err := openClusterView(prog, args, stderr, 2)
	if err != nil {
		return err
	}
	defer v.done()
	kf, dc, md := v.kf, v.dc, v.md
	brokers := make(kadm.BrokerDetails, 0, len(dc.Brokers))
	for _, b := range dc.Brokers {
		brokers = append(brokers, kadm.BrokerDetail{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	sum := clusterview.Summarize(md.Topics, brokers, dc.ControllerID)
	out := struct {
		ClusterID  string               `json:"cluster_id"`
		Controller int32                `json:"controller"`
		Topics     int                  `json:"topics"`
		Partitions int                  `json:"partitions"`
		Brokers    []clusterview.Broker `json:"brokers"`
	}{ClusterID: dc.ClusterID, Controller: dc.ControllerID, Topics: sum.Topics, Partitions: sum.Partitions, Brokers: sum.Brokers}
	if kf.json {
		return printJSON(stdout, out)
	}
	t := newTable(stdout)
	t.row("CLUSTER", out.ClusterID)
	t.row("CONTROLLER", out.Controller)
	t.row("TOPICS", out.Topics)
	t.row("PARTITIONS", out.Partitions)
	t.flush()
	fmt.Fprintln(stdout)
	t = newTable(stdout, "ID", "HOST", "PORT", "RACK", "LEADERS", "REPLICAS")
	for _, b := range out.Brokers {
		id := strconv.Itoa(int(b.ID))
		if b.Controller {
			id += "*"
		}
		t.row(id, b.Host, b.Port, b.Rack, b.Leaders, b.Replicas)
	}
	t.flush()
	return nil
}

// partitionRef names one partition in the health report.
type partitionRef struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	MinISR    int     `json:"min_insync_replicas,omitempty"`
}

func clusterHealth(prog string, args []string, stdout, stderr io.Writer) error {
	v, err := openClusterView(prog, args, stderr, 3)
	if err != nil {
		return err
	}
	defer v.done()
	ctx, adm, kf, dc, md := v.ctx, v.adm, v.kf, v.dc, v.md
	// min.insync.replicas of every topic, for the under-min-ISR list.
	minISR := map[string]int{}
	if names := md.Topics.Names(); len(names) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return err
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" {
					if n, err := strconv.Atoi(c.MaybeValue()); err == nil {
						minISR[rc.Name] = n
					}
				}
			}
		}
	}
	live := map[int32]bool{}
	for _, b := range dc.Brokers {
		live[b.NodeID] = true
	}
	out := struct {
		Healthy         bool           `json:"healthy"`
		Controller      int32          `json:"controller"`
		Brokers         []int32        `json:"brokers"`
		DownBrokers     []int32        `json:"down_brokers"`
		Offline         []partitionRef `json:"offline_partitions"`
		UnderReplicated []partitionRef `json:"under_replicated_partitions"`
		UnderMinISR     []partitionRef `json:"under_min_isr_partitions"`
	}{Controller: dc.ControllerID, Brokers: []int32{}, DownBrokers: []int32{}, Offline: []partitionRef{}, UnderReplicated: []partitionRef{}, UnderMinISR: []partitionRef{}}
	for id := range live {
		out.Brokers = append(out.Brokers, id)
	}
	slices.Sort(out.Brokers)
	down := map[int32]bool{}
	for _, td := range md.Topics.Sorted() {
		for _, pd := range td.Partitions.Sorted() {
			ref := partitionRef{Topic: td.Topic, Partition: pd.Partition, Leader: pd.Leader, Replicas: pd.Replicas, ISR: pd.ISR}
			for _, r := range pd.Replicas {
				if !live[r] {
					down[r] = true
				}
			}
			if pd.Leader < 0 {
				out.Offline = append(out.Offline, ref)
			}
			if len(pd.ISR) < len(pd.Replicas) {
				out.UnderReplicated = append(out.UnderReplicated, ref)
			}
			if m := minISR[td.Topic]; m > 0 && len(pd.ISR) < m {
				ref.MinISR = m
				out.UnderMinISR = append(out.UnderMinISR, ref)
			}
		}
	}
	for id := range down {
		out.DownBrokers = append(out.DownBrokers, id)
	}
	slices.Sort(out.DownBrokers)
	out.Healthy = len(out.Offline) == 0 && len(out.UnderReplicated) == 0 && len(out.DownBrokers) == 0 && dc.ControllerID >= 0
	if kf.json {
		if err := printJSON(stdout, out); err != nil {
			return err
		}
	} else {
		t := newTable(stdout)
		t.row("HEALTHY", out.Healthy)
		t.row("CONTROLLER", out.Controller)
		t.row("BROKERS", int32List(out.Brokers))
		t.row("DOWN BROKERS", int32List(out.DownBrokers))
		t.row("OFFLINE PARTITIONS", len(out.Offline))
		t.row("UNDER-REPLICATED PARTITIONS", len(out.UnderReplicated))
		t.row("UNDER-MIN-ISR PARTITIONS", len(out.UnderMinISR))
		t.flush()
		for _, list := range []struct {
			title string
			refs  []partitionRef
		}{{"OFFLINE", out.Offline}, {"UNDER-REPLICATED", out.UnderReplicated}, {"UNDER-MIN-ISR", out.UnderMinISR}} {
			if len(list.refs) == 0 {
				continue
			}
			fmt.Fprintf(stdout, "\n%s\n", list.title)
			t := newTable(stdout, "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR")
			for i, r := range list.refs {
				if i == 50 {
					t.row(fmt.Sprintf("... %d more (--json lists all)", len(list.refs)-50), "", "", "", "")
					break
				}
				t.row(r.Topic, r.Partition, r.Leader, int32List(r.Replicas), int32List(r.ISR))
			}
			t.flush()
		}
	}
	if !out.Healthy {
		return errUnhealthy
	}
	return nil
}

// errUnhealthy is health's exit status 1 (the report says why).
var errUnhealthy = fmt.Errorf("the cluster is not healthy")
