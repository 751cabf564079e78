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
	if got := parseStatusKB([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t 1 kB\n"), "VmRSS:"); got != 1<<10 {
		t.Errorf("VmRSS %d", got)
	}
}

func TestProcUsageSelf(t *testing.T) {
	u, err := procUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.PeakRSS <= 0 || u.RSS <= 0 || u.RSS > u.PeakRSS || u.CPUSeconds < 0 {
		t.Errorf("usage %+v", u)
	}
}

func TestParseMachineStat(t *testing.T) {
	got, err := parseMachineStat([]byte("cpu  100 5 50 1000 200 3 2 1 7 0\ncpu0 50 2 25 500 100 1 1 0 3 0\n"))
	// user+nice+system+irq+softirq+steal = 161 ticks; idle and iowait left out.
	if err != nil || got != 1.61 {
		t.Errorf("busy %v, %v", got, err)
	}
	for _, bad := range []string{"", "cpu 1 2 3\n", "intr 1 2 3 4 5 6 7 8 9\n", "cpu a b c d e f g h\n"} {
		if _, err := parseMachineStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if v, err := machineCPU(); err != nil || v <= 0 {
		t.Errorf("this machine: %v, %v", v, err)
	}
}
