package kconfig

import (
	"errors"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		raw     string
		want    string   // canonical text
		wantN   int64    // numeric / boolean value
		wantF   float64  // DOUBLE value
		wantL   []string // LIST value
		wantErr string   // reason; "" = valid
	}{
		{name: "bool true", typ: TypeBoolean, raw: "true", want: "true", wantN: 1},
		{name: "bool any case and spaces", typ: TypeBoolean, raw: " TRUE ", want: "true", wantN: 1},
		{name: "bool false", typ: TypeBoolean, raw: "False", want: "false"},
		{name: "bool 1 is not a boolean", typ: TypeBoolean, raw: "1", wantErr: "Value must be true or false"},
		{name: "bool empty", typ: TypeBoolean, raw: "", wantErr: "Value must be true or false"},
		{name: "bool yes", typ: TypeBoolean, raw: "yes", wantErr: "Value must be true or false"},
		{name: "int", typ: TypeInt, raw: "42", want: "42", wantN: 42},
		{name: "int spaces and sign", typ: TypeInt, raw: " +42 ", want: "42", wantN: 42},
		{name: "int negative", typ: TypeInt, raw: "-1", want: "-1", wantN: -1},
		{name: "int max", typ: TypeInt, raw: "2147483647", want: "2147483647", wantN: 2147483647},
		{name: "int overflow", typ: TypeInt, raw: "2147483648", wantErr: "Not a number of type INT"},
		{name: "int decimal", typ: TypeInt, raw: "1.5", wantErr: "Not a number of type INT"},
		{name: "int empty", typ: TypeInt, raw: "", wantErr: "Not a number of type INT"},
		{name: "int underscore", typ: TypeInt, raw: "1_000", wantErr: "Not a number of type INT"},
		{name: "short max", typ: TypeShort, raw: "32767", want: "32767", wantN: 32767},
		{name: "short overflow", typ: TypeShort, raw: "32768", wantErr: "Not a number of type SHORT"},
		{name: "long max", typ: TypeLong, raw: "9223372036854775807", want: maxLong, wantN: 1<<63 - 1},
		{name: "long overflow", typ: TypeLong, raw: "9223372036854775808", wantErr: "Not a number of type LONG"},
		{name: "long word", typ: TypeLong, raw: "abc", wantErr: "Not a number of type LONG"},
		{name: "double", typ: TypeDouble, raw: "0.25", want: "0.25", wantF: 0.25},
		{name: "double integer text", typ: TypeDouble, raw: " 1 ", want: "1", wantF: 1},
		{name: "double exponent", typ: TypeDouble, raw: "5e-1", want: "5e-1", wantF: 0.5},
		{name: "double NaN", typ: TypeDouble, raw: "NaN", wantErr: "Not a number of type DOUBLE"},
		{name: "double Inf", typ: TypeDouble, raw: "Inf", wantErr: "Not a number of type DOUBLE"},
		{name: "double word", typ: TypeDouble, raw: "half", wantErr: "Not a number of type DOUBLE"},
		{name: "list one", typ: TypeList, raw: "delete", want: "delete", wantL: []string{"delete"}},
		{name: "list trims elements", typ: TypeList, raw: " compact , delete ", want: "compact,delete", wantL: []string{"compact", "delete"}},
		{name: "list empty", typ: TypeList, raw: "  ", want: ""},
		{name: "list keeps empty element", typ: TypeList, raw: "a,,b", want: "a,,b", wantL: []string{"a", "", "b"}},
		{name: "string trimmed", typ: TypeString, raw: " gzip ", want: "gzip"},
		{name: "password", typ: TypePassword, raw: "s3cret", want: "s3cret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, reason := parse(tc.typ, tc.raw)
			if reason != tc.wantErr {
				t.Fatalf("reason = %q, want %q", reason, tc.wantErr)
			}
			if tc.wantErr != "" {
				return
			}
			if v.s != tc.want || v.n != tc.wantN || v.f != tc.wantF || !slices.Equal(v.l, tc.wantL) {
				t.Errorf("parse = %+v, want s=%q n=%d f=%v l=%q", v, tc.want, tc.wantN, tc.wantF, tc.wantL)
			}
		})
	}
}

func TestChecks(t *testing.T) {
	tests := []struct {
		name  string
		check check
		typ   Type
		raw   string
		want  string
	}{
		{"atLeast ok", atLeast(-1), TypeLong, "-1", ""},
		{"atLeast low", atLeast(-1), TypeLong, "-2", "Value must be at least -1"},
		{"between low", between(1, 10), TypeInt, "0", "Value must be at least 1"},
		{"between high", between(1, 10), TypeInt, "11", "Value must be at most 10"},
		{"between edge", between(1, 10), TypeInt, "10", ""},
		{"betweenFloat low", betweenFloat(0, 1), TypeDouble, "-0.1", "Value must be at least 0"},
		{"betweenFloat high", betweenFloat(0, 1), TypeDouble, "1.01", "Value must be at most 1"},
		{"betweenFloat edges", betweenFloat(0, 1), TypeDouble, "1.0", ""},
		{"oneOf ok", oneOf("a", "b"), TypeString, "b", ""},
		{"oneOf case sensitive", oneOf("a", "b"), TypeString, "B", "Value must be one of: a, b"},
		{"listOf ok", listOf("a", "b"), TypeList, "b,a", ""},
		{"listOf empty", listOf("a", "b"), TypeList, "", "List must not be empty; allowed elements: a, b"},
		{"listOf bad element", listOf("a", "b"), TypeList, "a,c", `List element "c" is not one of: a, b`},
		{"throttled empty", throttledReplicas, TypeList, "", ""},
		{"throttled star", throttledReplicas, TypeList, "*", ""},
		{"throttled pairs", throttledReplicas, TypeList, "0:101, 1:102", ""},
		{"throttled star in list", throttledReplicas, TypeList, "*,0:1", `Value must be "*" or a list of partitionId:brokerId pairs, e.g. 0:101,1:102`},
		{"throttled missing broker", throttledReplicas, TypeList, "0:", `Value must be "*" or a list of partitionId:brokerId pairs, e.g. 0:101,1:102`},
		{"throttled negative", throttledReplicas, TypeList, "-1:2", `Value must be "*" or a list of partitionId:brokerId pairs, e.g. 0:101,1:102`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, reason := parse(tc.typ, tc.raw)
			if reason != "" {
				t.Fatalf("parse: %s", reason)
			}
			if got := tc.check(v); got != tc.want {
				t.Errorf("check(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

func TestConfigErrorMessages(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		sentinel error
		want     string
	}{
		{"invalid", ValidateTopic("retention.ms", "-5"), ErrInvalidValue,
			"Invalid value -5 for configuration retention.ms: Value must be at least -1"},
		{"not a number", ValidateTopic("segment.bytes", "big"), ErrInvalidValue,
			"Invalid value big for configuration segment.bytes: Not a number of type INT"},
		{"unknown topic", ValidateTopic("retention.hours", "1"), ErrUnknownConfig,
			"Unknown topic config name: retention.hours"},
		{"unknown broker", ValidateBroker("no.such.config", "1"), ErrUnknownConfig,
			"Unknown broker config name: no.such.config"},
		{"read-only", ValidateBroker("num.partitions", "3"), ErrReadOnly,
			"Cannot update broker config num.partitions dynamically: it is read-only and only taken from the broker's config file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(tc.err, tc.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", tc.err, tc.sentinel)
			}
			var ce *ConfigError
			if !errors.As(tc.err, &ce) {
				t.Fatalf("%T is not a *ConfigError", tc.err)
			}
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("message\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSensitiveValueHiddenInErrors(t *testing.T) {
	d := &def{name: "secret", typ: TypePassword}
	err := d.invalid("broker", "hunter2", "Value is wrong")
	want := "Invalid value [hidden] for configuration secret: Value is wrong"
	if err.Error() != want {
		t.Errorf("got %q, want %q", err.Error(), want)
	}
}

func TestStrings(t *testing.T) {
	types := map[Type]string{
		TypeBoolean: "BOOLEAN", TypeString: "STRING", TypeInt: "INT", TypeShort: "SHORT",
		TypeLong: "LONG", TypeDouble: "DOUBLE", TypeList: "LIST", TypeClass: "CLASS",
		TypePassword: "PASSWORD", TypeUnknown: "UNKNOWN",
	}
	for typ, want := range types {
		if got := typ.String(); got != want {
			t.Errorf("Type(%d).String() = %q, want %q", typ, got, want)
		}
	}
	sources := map[Source]string{
		SourceDynamicTopic: "DYNAMIC_TOPIC_CONFIG", SourceDynamicBroker: "DYNAMIC_BROKER_CONFIG",
		SourceDynamicDefaultBroker: "DYNAMIC_DEFAULT_BROKER_CONFIG",
		SourceStaticBroker:         "STATIC_BROKER_CONFIG", SourceDefault: "DEFAULT_CONFIG",
		SourceUnknown: "UNKNOWN",
	}
	for src, want := range sources {
		if got := src.String(); got != want {
			t.Errorf("Source(%d).String() = %q, want %q", src, got, want)
		}
	}
}
