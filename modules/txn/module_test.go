package txn

import "testing"

// TestTxnTopicConfigs: __transaction_state is created compacted, with segment.bytes
// from transaction.state.log.segment.bytes.
func TestTxnTopicConfigs(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []envOpt
		want string
	}{
		{"default", nil, "104857600"},
		{"configured", []envOpt{withConfigs("transaction.state.log.segment.bytes", "1048576")}, "1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			e.c.mu.Lock()
			got := e.c.created[TxnTopic]
			e.c.mu.Unlock()
			if got["segment.bytes"] != tc.want || got["cleanup.policy"] != "compact" {
				t.Errorf("%s created with %v, want segment.bytes=%s cleanup.policy=compact", TxnTopic, got, tc.want)
			}
		})
	}
}
