package metadata_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// The inter-broker security settings are checked at startup: a broker of a cluster
// whose inter-broker listener is SASL needs its own credentials, mutual TLS on the raft
// port needs a trust store, and bad credentials are named without being shown.
func TestInterBrokerSecurityAtStartup(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	ks := tlstest.WriteFile(t, dir, "broker.pem", ca.Server(t, "broker").KeyStore())
	cluster := func(listener, configs string) string {
		raft := testcheck.FreeAddr(t)
		return fmt.Sprintf(`node_id: 1
listeners: [{name: %s, address: "127.0.0.1:0"}]
configs: {%s}
modules:
  metadata: {use: raft, raft_listen: %q, voters: ["1@%s", "2@%s"]}
`, listener, configs, raft, raft, testcheck.FreeAddr(t))
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"sasl without credentials", cluster("SASL_PLAINTEXT", ""), "set listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"},
		{"plain mechanism without credentials", cluster("SASL_PLAINTEXT", `sasl.mechanism.inter.broker.protocol: PLAIN`), "set listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{"bad credentials", cluster("SASL_PLAINTEXT", `listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config: "org.apache.kafka.common.security.scram.ScramLoginModule required username=broker password=\"hunter2\";"`),
			"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"},
		{"mutual TLS without a trust store", cluster("SSL", "ssl.keystore.location: "+ks), "ssl.truststore.location"},
		{"both listener settings", cluster("SSL", "inter.broker.listener.name: SSL, security.inter.broker.protocol: SSL, ssl.keystore.location: "+ks), "only one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := testbroker.StartError(t, tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
