package bench

import (
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// comm may contain spaces and parentheses.
	stat := []byte("1234 (my (weird) comm) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000000 500 18446744073709551615")
	u, err := parseProcStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPUSeconds != 3.0 {
		t.Errorf("cpu %v, want 3.0 (300 ticks)", u.CPUSeconds)
	}
	if _, err := parseProcStat([]byte("garbage")); err == nil {
		t.Error("garbage parsed")
	}
	if _, err := parseProcStat([]byte("1 (x) S 1 2")); err == nil {
		t.Error("short stat parsed")
	}
	if got := parseVmHWM([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t 1 kB\n")); got != 2<<20 {
		t.Errorf("VmHWM %d", got)
	}
}

func TestProcUsageSelf(t *testing.T) {
	u, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.PeakRSS <= 0 || u.CPUSeconds < 0 {
		t.Errorf("usage %+v", u)
	}
}
