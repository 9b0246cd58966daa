package main

import (
	"testing"

	sdk "github.com/sluicehq/sluice/sdk-wasm"
)

func rec(headers ...sdk.Header) sdk.Record { return sdk.Record{Value: []byte("v"), Headers: headers} }

func TestDrop(t *testing.T) {
	anyValue := filter{header: "drop"}
	only := filter{header: "drop", value: "true", matchValue: true}
	for _, tc := range []struct {
		name      string
		r         sdk.Record
		any, only bool
	}{
		{"no headers", rec(), false, false},
		{"other header", rec(sdk.Header{Key: "keep", Value: []byte("true")}), false, false},
		{"drop=true", rec(sdk.Header{Key: "x"}, sdk.Header{Key: "drop", Value: []byte("true")}), true, true},
		{"drop=false", rec(sdk.Header{Key: "drop", Value: []byte("false")}), true, false},
		{"drop null", rec(sdk.Header{Key: "drop"}), true, false},
		{"drop empty", rec(sdk.Header{Key: "drop", Value: []byte{}}), true, false},
		{"case differs", rec(sdk.Header{Key: "Drop", Value: []byte("true")}), false, false},
	} {
		if got := anyValue.drop(tc.r); got != tc.any {
			t.Errorf("%s: any value: drop = %v", tc.name, got)
		}
		if got := only.drop(tc.r); got != tc.only {
			t.Errorf("%s: value true: drop = %v", tc.name, got)
		}
	}
}
