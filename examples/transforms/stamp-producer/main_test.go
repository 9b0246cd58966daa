package main

import (
	"testing"

	sdk "github.com/sluicehq/sluice/sdk-wasm"
)

func TestStamp(t *testing.T) {
	alice := sdk.Source{PrincipalType: "User", PrincipalName: "alice", ClientID: "billing"}
	in := sdk.Record{Value: []byte("v"), Headers: []sdk.Header{
		{Key: "keep", Value: []byte("1")},
		{Key: principalHeader, Value: []byte("User:admin")}, // forged by the client
	}}
	out := stamp(in.WithSource(alice))
	want := []sdk.Header{{Key: "keep", Value: []byte("1")}, {Key: principalHeader, Value: []byte("User:alice")}, {Key: clientIDHeader, Value: []byte("billing")}}
	if len(out.Headers) != len(want) {
		t.Fatalf("headers %+v", out.Headers)
	}
	for i, h := range want {
		if out.Headers[i].Key != h.Key || string(out.Headers[i].Value) != string(h.Value) {
			t.Errorf("header %d: %s=%q, want %s=%q", i, out.Headers[i].Key, out.Headers[i].Value, h.Key, h.Value)
		}
	}
	if string(in.Headers[1].Value) != "User:admin" {
		t.Error("stamp changed its input's headers")
	}
	// Derived mode (no source): empty values, forged ones still removed.
	out = stamp(in)
	if len(out.Headers) != 3 || len(out.Headers[1].Value) != 0 || len(out.Headers[2].Value) != 0 {
		t.Fatalf("no source: headers %+v", out.Headers)
	}
}
