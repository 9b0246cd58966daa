package main

import (
	"os"
	"testing"
)

func TestParseProc(t *testing.T) {
	// The command name may contain spaces and parentheses: fields count after the last ')'.
	stat := []byte("4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 130 0 0 20 0 12 0 99 123456 789 18446744073709551615\n")
	cpu, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if cpu != 3.8 { // (250 + 130) / 100
		t.Fatalf("cpu = %v, want 3.8", cpu)
	}
	if _, err := parseStatCPU([]byte("4242 (x) S 1 2")); err == nil {
		t.Fatal("short stat parsed")
	}
	status := []byte("Name:\tsluice\nVmPeak:\t  999 kB\nVmHWM:\t   2048 kB\nVmRSS:\t   1024 kB\n")
	hwm, rss := parseStatusMem(status)
	if hwm != 2048<<10 || rss != 1024<<10 {
		t.Fatalf("hwm %d rss %d", hwm, rss)
	}
	// This process: some CPU used, an RSS.
	p, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.hwm <= 0 || p.rss <= 0 || p.hwm < p.rss || p.cpu < 0 {
		t.Fatalf("readProc(self) = %+v", p)
	}
	if _, err := readProc(1 << 30); err == nil {
		t.Fatal("readProc of a pid that cannot exist succeeded")
	}
}
