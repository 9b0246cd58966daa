package interop

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// franzGroupTests are franz-go's own group tests (pkg/kgo, from the module cache) that
// must pass against Sluice. Test848RegexBrokerResolves checks that a KIP-848 regex is
// resolved by the broker over whole names, internal topics included; the TestShare*
// tests (and TestConsumeRegexShareSkipsInternal) need share groups (ShareFetch and
// ShareAcknowledge v2), TestShareGroupETL runs 500,000 records through three levels
// of share consumers with releases, rejects and killed members.
var franzGroupTests = []string{
	"Test848RegexBrokerResolves",
	"TestConsumeRegex",
	"TestSignalSubscriptionChange848",
	"TestConsumeRegexShareSkipsInternal",
	"TestShareGroup",
	"TestShareGroupAckOnClose",
	"TestShareGroupOffsetsAdmin",
	"TestShareGroupETL",
}

// TestFranzGroupSuite runs franzGroupTests against one broker and fails on any that
// does not pass (a skip counts as a failure: it means the broker lacked something).
func TestFranzGroupSuite(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		need(t, "the go command is not on PATH")
	}
	b := startBroker(t)
	pattern := "^(" + strings.Join(franzGroupTests, "|") + ")$"
	out := runCmd(t, runOpts{timeout: 5 * time.Minute, env: []string{"KGO_SEEDS=" + b.addr, "KGO_TEST_RF=1"}},
		goBin, "test", "-count=1", "-run", pattern, "-v", "github.com/twmb/franz-go/pkg/kgo")
	t.Logf("franz-go's group tests:\n%s", tail(out, 20))
	for _, name := range franzGroupTests {
		if !regexp.MustCompile(`(?m)^--- PASS: ` + name + ` `).MatchString(out) {
			t.Errorf("%s did not pass", name)
		}
	}
}
