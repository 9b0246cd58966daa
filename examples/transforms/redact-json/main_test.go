package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ field, in, want string }{
		{"ssn", `{"name":"ann","ssn":"123-45-6789"}`, `{"name":"ann","ssn":"***"}`},
		{"ssn", `{ "ssn" : 123456789 , "z": [1, 2.50, true, null] }`, `{"ssn":"***","z":[1,2.50,true,null]}`},
		{"ssn", `{"ssn":{"a":[1,{"b":2}]},"after":"x"}`, `{"ssn":"***","after":"x"}`},
		{"ssn", `{"ssn":[],"t":{}}`, `{"ssn":"***","t":{}}`},
		{"ssn", `[{"ssn":"1"},{"x":{"ssn":"2","y":"<&>"}}]`, `[{"ssn":"***"},{"x":{"ssn":"***","y":"<&>"}}]`},
		{"ssn", `{"\u0073sn":"1"}`, `{"ssn":"***"}`},
		{"card", `{"ssn":"1","card":"4111"}`, `{"ssn":"1","card":"***"}`},
		{"ssn", `{"name":"ssn","list":["ssn"]}`, `{"name":"ssn","list":["ssn"]}`},
		{"ssn", `{"a":"b"}`, `{"a":"b"}`},
		{"ssn", `not json but has ssn`, `not json but has ssn`},
		{"ssn", `{"ssn":"1"`, `{"ssn":"1"`},
		{"ssn", ``, ``},
	} {
		got := string(redact([]byte(tc.in), tc.field))
		if got != tc.want {
			t.Errorf("redact(%s, %q) = %s, want %s", tc.in, tc.field, got, tc.want)
		}
		if json.Valid([]byte(tc.in)) {
			var a, b any
			if json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal([]byte(tc.want), &b) != nil || !reflect.DeepEqual(a, b) {
				t.Errorf("redact(%s): output %s is not the expected JSON", tc.in, got)
			}
		}
	}
	if redact(nil, "ssn") != nil {
		t.Error("a null value must stay null")
	}
	// Unchanged values are returned as is (same backing array), formatting included.
	in := []byte(`{ "a" : 1 }`)
	if out := redact(in, "ssn"); &out[0] != &in[0] {
		t.Error("an unchanged value is copied")
	}
}
