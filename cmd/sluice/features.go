package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The feature-level and broker-retirement commands of `sluice cluster`, as Kafka's
// kafka-features.sh and kafka-cluster.sh unregister do them.

// clusterFeatures describes the feature levels: what the broker asked supports and
// what the cluster finalized (ApiVersions v3+), with the finalized levels' epoch.
func clusterFeatures(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+"\n", stderr)
	if _, err := kf.parse(fs, args, 0, 0, ""); err != nil {
		return err
	}
	ctx, adm, done, err := kf.connect(1)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice-cli", "1"
	resp, err := req.RequestWith(ctx, adm.kgo)
	if err == nil {
		err = kerrOf(resp.ErrorCode, nil)
	}
	if err != nil {
		return err
	}
	type feature struct {
		Name      string `json:"name"`
		Min       int16  `json:"supported_min"`
		Max       int16  `json:"supported_max"`
		Finalized int16  `json:"finalized"`
	}
	finalized := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	out := struct {
		Epoch    int64     `json:"epoch"`
		Features []feature `json:"features"`
	}{Epoch: resp.FinalizedFeaturesEpoch, Features: []feature{}}
	for _, f := range resp.SupportedFeatures {
		out.Features = append(out.Features, feature{f.Name, f.MinVersion, f.MaxVersion, finalized[f.Name]})
	}
	if kf.json {
		return printJSON(stdout, out)
	}
	t := newTable(stdout, "FEATURE", "SUPPORTED", "FINALIZED")
	for _, f := range out.Features {
		t.row(f.Name, fmt.Sprintf("%d-%d", f.Min, f.Max), f.Finalized)
	}
	t.flush()
	return nil
}

// clusterUpgrade and clusterDowngrade set feature levels (UpdateFeatures).
func clusterUpgrade(prog string, args []string, stdout, stderr io.Writer) error {
	return setFeatures(prog, args, stdout, stderr, false)
}

func clusterDowngrade(prog string, args []string, stdout, stderr io.Writer) error {
	return setFeatures(prog, args, stdout, stderr, true)
}

func setFeatures(prog string, args []string, stdout, stderr io.Writer, down bool) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" FEATURE=LEVEL...\n", stderr)
	dry := fs.Bool("dry-run", false, "check the change without making it")
	var unsafe *bool
	if down {
		unsafe = fs.Bool("unsafe", false, "an unsafe downgrade (metadata.version refuses it, as Kafka does)")
	}
	pairs, err := kf.parse(fs, args, 1, -1, "FEATURE=LEVEL")
	if err != nil {
		return err
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.ValidateOnly = *dry
	var names []string
	for _, p := range pairs {
		name, lv, ok := strings.Cut(p, "=")
		level, err := strconv.ParseInt(lv, 10, 16)
		if !ok || name == "" || err != nil {
			return usageError{fmt.Sprintf("%q: want FEATURE=LEVEL", p)}
		}
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = name, int16(level), 1
		if down {
			fu.UpgradeType, fu.AllowDowngrade = 2, true
			if *unsafe {
				fu.UpgradeType = 3
			}
		}
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
		names = append(names, name)
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	resp, err := req.RequestWith(ctx, adm.kgo)
	if err != nil {
		return err
	}
	// UpdateFeatures is all or nothing: one error fails every feature.
	fail := withReason(resp.ErrorCode, resp.ErrorMessage)
	status := "set"
	if *dry {
		status = "valid"
	}
	return printStatuses(stdout, kf.json, "FEATURE", status, names, func(string) error { return fail }, "feature updates")
}

// clusterUnregister removes stopped brokers' registrations (UnregisterBroker).
func clusterUnregister(prog string, args []string, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet(prog, "usage: "+prog+" BROKER_ID...\n", stderr)
	ids, err := kf.parse(fs, args, 1, -1, "broker id")
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := strconv.ParseInt(id, 10, 32); err != nil {
			return usageError{fmt.Sprintf("broker id %q: want a number", id)}
		}
	}
	ctx, adm, done, err := kf.connect(2)
	if err != nil {
		return err
	}
	defer done()
	errs := map[string]error{}
	for _, id := range ids {
		n, _ := strconv.ParseInt(id, 10, 32)
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = int32(n)
		resp, err := req.RequestWith(ctx, adm.kgo)
		if err == nil {
			err = withReason(resp.ErrorCode, resp.ErrorMessage)
		}
		errs[id] = err
	}
	return printStatuses(stdout, kf.json, "BROKER", "unregistered", ids, func(id string) error { return errs[id] }, "unregistrations")
}

// withReason is kerrOf for a status table: the code's name and the broker's reason,
// which the table would otherwise leave out.
func withReason(code int16, msg *string) error {
	err := kerrOf(code, msg)
	if err == nil || msg == nil || *msg == "" {
		return err
	}
	return errors.New(err.Error())
}
