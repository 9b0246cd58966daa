package clientmetrics

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
		ok                bool
	}{
		{ConfigInterval, " 100 ", "100", true},
		{ConfigInterval, "3600000", "3600000", true},
		{ConfigInterval, "99", "", false},
		{ConfigInterval, "x", "", false},
		{ConfigMetrics, " a. , b ,, ", "a.,b", true},
		{ConfigMetrics, "", "", true},
		{ConfigMatch, "client_id=app-.*, client_software_name=librdkafka", "client_id=app-.*,client_software_name=librdkafka", true},
		{ConfigMatch, "client_id=a,client_id=b", "", false},
		{ConfigMatch, "nokey=a", "", false},
		{ConfigMatch, "client_id=(", "", false},
		{ConfigMatch, "client_id=" + strings.Repeat("a", maxPattern+1), "", false},
		{"other", "1", "", false},
	} {
		got, err := Validate(tc.name, tc.value)
		if (err == nil) != tc.ok || got != tc.want || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("Validate(%s, %q) = %q, %v; want %q, ok %v", tc.name, tc.value, got, err, tc.want, tc.ok)
		}
	}
}

// Load parses the image's subscriptions, sorted, and names the unreadable ones;
// selectors match whole values.
func TestLoadAndMatch(t *testing.T) {
	im := &kernel.Image{Extensions: map[string]map[string][]byte{Namespace: {
		"b":    []byte(`{"metrics":"*","match":"client_software_name=lib.*,client_source_port=9\\d+"}`),
		"a":    []byte(`{"interval.ms":"1000"}`),
		"bad":  []byte(`{"interval.ms":"1"}`),
		"junk": []byte(`not json`),
	}}}
	subs, bad := Load(im)
	if len(subs) != 2 || subs[0].Name != "a" || subs[1].Name != "b" || !slices.Equal(bad, []string{"bad", "junk"}) {
		t.Fatalf("Load: %+v, bad %v", subs, bad)
	}
	if subs[0].IntervalMs != 1000 || subs[0].Metrics != nil || subs[1].IntervalMs != DefaultIntervalMs || !slices.Equal(subs[1].Metrics, []string{""}) {
		t.Errorf("parsed %+v", subs)
	}
	b := &subs[1]
	for _, tc := range []struct {
		c    Client
		want bool
	}{
		{Client{SoftwareName: "librdkafka", SourcePort: "9092"}, true},
		{Client{SoftwareName: "librdkafka", SourcePort: "8092"}, false},
		{Client{SoftwareName: "xlibrdkafka", SourcePort: "9092"}, false},
		{Client{SoftwareName: "librdkafka", SourcePort: "90921"}, true},
	} {
		if got := b.Matches(tc.c); got != tc.want {
			t.Errorf("Matches(%+v) = %v", tc.c, got)
		}
	}
	if !subs[0].Matches(Client{}) {
		t.Error("a subscription without selectors matches every client")
	}
}
