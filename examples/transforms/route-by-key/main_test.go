package main

import "testing"

func TestRoute(t *testing.T) {
	for key, want := range map[string]int{
		"apple": outLow, "m": outLow, "Mango": outLow, "Alpha": outLow,
		"n": outHigh, "zebra": outHigh, "Nope": outHigh, "": outHigh, "1abc": outHigh,
		"@": outHigh, "`": outHigh, "{": outHigh, "é": outHigh,
	} {
		if got := route([]byte(key)); got != want {
			t.Errorf("route(%q) = %d, want %d", key, got, want)
		}
	}
	if route(nil) != outHigh {
		t.Error("null key")
	}
}
