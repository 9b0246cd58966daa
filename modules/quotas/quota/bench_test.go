package quota

import (
	"fmt"
	"testing"
)

// benchSet is a Set of about 10,000 entities at every precedence level.
func benchSet(b *testing.B) *Set {
	b.Helper()
	var entries []Entry
	add := func(v Values, cs ...Component) {
		entries = append(entries, Entry{mustEntity(b, cs...), v})
	}
	for i := range 4000 { // level 1
		add(Values{ProducerByteRate: 1e6, ConsumerByteRate: 2e6}, user(fmt.Sprintf("user-%d", i%1000)), client(fmt.Sprintf("client-%d", i)))
	}
	for i := range 2000 { // level 3
		add(Values{ProducerByteRate: 3e6, RequestPercentage: 50}, user(fmt.Sprintf("user-%d", 1000+i)))
	}
	for i := range 1000 { // level 2
		add(Values{ConsumerByteRate: 4e6}, user(fmt.Sprintf("user-%d", 3000+i)), def(TypeClientID))
	}
	for i := range 1000 { // level 4
		add(Values{ProducerByteRate: 5e6}, def(TypeUser), client(fmt.Sprintf("app-%d", i)))
	}
	for i := range 2000 { // level 7
		add(Values{ProducerByteRate: 6e6}, client(fmt.Sprintf("tool-%d", i)))
	}
	add(Values{ControllerMutationRate: 10}, def(TypeUser), def(TypeClientID)) // level 5
	add(Values{RequestPercentage: 200}, def(TypeUser))                        // level 6
	add(Values{ProducerByteRate: 7e6}, def(TypeClientID))                     // level 8
	s, err := FromEntries(entries)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkResolve(b *testing.B) {
	s := benchSet(b)
	type query struct{ key, user, client string }
	cases := []struct {
		name string
		q    []query
	}{
		{"level1", []query{{ProducerByteRate, "user-7", "client-7"}, {ConsumerByteRate, "user-999", "client-3999"}}},
		{"level3", []query{{ProducerByteRate, "user-1500", "whatever"}}},
		{"level4", []query{{ProducerByteRate, "nobody", "app-17"}}},
		{"level8", []query{{ProducerByteRate, "nobody", "nothing"}}},
		{"miss", []query{{ConsumerByteRate, "nobody", "nothing"}}},
		{"mixed", []query{
			{ProducerByteRate, "user-7", "client-7"},
			{ProducerByteRate, "user-1500", "x"},
			{ConsumerByteRate, "user-3500", "x"},
			{ProducerByteRate, "ANONYMOUS", "tool-5"},
			{RequestPercentage, "user-42", "client-42"},
			{ControllerMutationRate, "u", "c"},
			{ConsumerByteRate, "ANONYMOUS", "rdkafka"},
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				q := c.q[i%len(c.q)]
				s.Resolve(q.key, q.user, q.client)
			}
		})
	}
}

func BenchmarkResolveIP(b *testing.B) {
	s := &Set{}
	for i := range 1000 {
		s = s.With(mustEntity(b, ipc(fmt.Sprintf("10.1.%d.%d", i/256, i%256))), Values{ConnectionCreationRate: 5})
	}
	s = s.With(mustEntity(b, def(TypeIP)), Values{ConnectionCreationRate: 1})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			s.ResolveIP("10.1.2.3")
		} else {
			s.ResolveIP("192.168.0.1")
		}
	}
}

// BenchmarkWith is one replayed record on a Set of ~10,000 entities.
func BenchmarkWith(b *testing.B) {
	s := benchSet(b)
	e := mustEntity(b, user("user-7"), client("client-7"))
	v := Values{ProducerByteRate: 1}
	b.ReportAllocs()
	for b.Loop() {
		s.With(e, v)
	}
}

func BenchmarkFromEntries(b *testing.B) {
	entries := benchSet(b).Entries()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromEntries(entries); err != nil {
			b.Fatal(err)
		}
	}
}
