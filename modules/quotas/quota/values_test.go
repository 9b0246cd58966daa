package quota

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateValue(t *testing.T) {
	u := mustEntity(t, user("alice"))
	uc := mustEntity(t, def(TypeUser), client("app"))
	c := mustEntity(t, def(TypeClientID))
	ip := mustEntity(t, ipc("10.0.0.1"))
	ipDef := mustEntity(t, def(TypeIP))
	const big = 1 << 62
	below63 := math.Nextafter(1<<63, 0) // 2^63-1024, the largest float64 below 2^63
	tests := []struct {
		name string
		e    Entity
		key  string
		v    float64
		ok   bool
	}{
		{"producer", u, ProducerByteRate, 1048576, true},
		{"consumer", uc, ConsumerByteRate, 1, true},
		{"request percentage fraction", c, RequestPercentage, 12.5, true},
		{"request percentage above 100", u, RequestPercentage, 250, true},
		{"mutation rate fraction", u, ControllerMutationRate, 0.5, true},
		{"producer huge", u, ProducerByteRate, big, true},
		{"producer largest below 2^63", u, ProducerByteRate, below63, true},
		{"producer 2^63", u, ProducerByteRate, 1 << 63, false},
		{"producer 1e300", u, ProducerByteRate, 1e300, false},
		{"producer fraction", u, ProducerByteRate, 1.5, false},
		{"producer small fraction", u, ProducerByteRate, 0.5, false},
		{"producer just below whole", u, ProducerByteRate, 999.9999999, false},
		{"producer within Kafka's slack above whole", u, ProducerByteRate, 1000.0000001, true},
		{"consumer fraction", c, ConsumerByteRate, 10.25, false},
		{"producer zero", u, ProducerByteRate, 0, false},
		{"producer negative zero", u, ProducerByteRate, math.Copysign(0, -1), false},
		{"producer negative", u, ProducerByteRate, -1, false},
		{"request zero", u, RequestPercentage, 0, false},
		{"request negative", u, RequestPercentage, -0.5, false},
		{"request NaN", u, RequestPercentage, math.NaN(), false},
		{"request +Inf", u, RequestPercentage, math.Inf(1), false},
		{"mutation -Inf", u, ControllerMutationRate, math.Inf(-1), false},
		{"mutation NaN", u, ControllerMutationRate, math.NaN(), false},
		{"mutation tiny", u, ControllerMutationRate, 1e-300, true},
		{"connection rate on user", u, ConnectionCreationRate, 10, false},
		{"connection rate on client", c, ConnectionCreationRate, 10, false},
		{"unknown key", u, "fetch_byte_rate", 10, false},
		{"empty key", u, "", 10, false},
		{"key case matters", u, "Producer_Byte_Rate", 10, false},
		{"connection rate", ip, ConnectionCreationRate, 100, true},
		{"connection rate default", ipDef, ConnectionCreationRate, 1, true},
		{"connection rate max int32", ip, ConnectionCreationRate, math.MaxInt32, true},
		{"connection rate above int32", ip, ConnectionCreationRate, math.MaxInt32 + 1, false},
		{"connection rate zero", ip, ConnectionCreationRate, 0, false},
		{"connection rate negative", ip, ConnectionCreationRate, -5, false},
		{"connection rate fraction", ip, ConnectionCreationRate, 2.5, false},
		{"connection rate NaN", ip, ConnectionCreationRate, math.NaN(), false},
		{"connection rate Inf", ipDef, ConnectionCreationRate, math.Inf(1), false},
		{"producer on ip", ip, ProducerByteRate, 10, false},
		{"consumer on ip", ipDef, ConsumerByteRate, 10, false},
		{"request on ip", ip, RequestPercentage, 10, false},
		{"mutation on ip", ip, ControllerMutationRate, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateValue(tt.e, tt.key, tt.v)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidateValue(%s, %s, %v) = %v", tt.e, tt.key, tt.v, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidQuota) {
				t.Fatalf("ValidateValue(%s, %s, %v) = %v, want ErrInvalidQuota", tt.e, tt.key, tt.v, err)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name the key %q", err, tt.key)
			}
		})
	}
}

func TestValidateValueZeroEntity(t *testing.T) {
	if err := ValidateValue(Entity{}, ProducerByteRate, 1); !errors.Is(err, ErrInvalidEntity) {
		t.Fatalf("err = %v, want ErrInvalidEntity", err)
	}
}
