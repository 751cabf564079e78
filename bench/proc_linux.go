package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It is 100 on
// every Linux architecture Go supports (the kernel fixes it for userspace ABI).
const clockTicks = 100

// procUsage reads CPU time from /proc/<pid>/stat and peak and current RSS (VmHWM,
// VmRSS) from /proc/<pid>/status.
//
//	/proc/<pid>/stat: pid (comm) state ppid ... utime(14) stime(15) ...
//	comm may hold spaces and parentheses: fields are counted after the last ')'.
func procUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("bench: broker usage: %w", err)
	}
	u, err := parseProcStat(stat)
	if err != nil {
		return Usage{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("bench: broker usage: %w", err)
	}
	u.PeakRSS, u.RSS = parseStatusKB(status, "VmHWM:"), parseStatusKB(status, "VmRSS:")
	return u, nil
}

func parseProcStat(stat []byte) (Usage, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Usage{}, fmt.Errorf("bench: malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15.
	if len(f) < 13 {
		return Usage{}, fmt.Errorf("bench: short /proc stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return Usage{}, fmt.Errorf("bench: malformed /proc stat times")
	}
	return Usage{CPUSeconds: float64(ut+st) / clockTicks}, nil
}

// parseVmHWM is the peak RSS of /proc/<pid>/status, in bytes.
func parseVmHWM(status []byte) int64 { return parseStatusKB(status, "VmHWM:") }

// parseStatusKB reads one "Name:   123 kB" line of /proc/<pid>/status, in bytes (0
// when absent).
func parseStatusKB(status []byte, name string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

func machineDetails() (cpuModel, kernel string) {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpuModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		kernel = unix.ByteSliceToString(uts.Sysname[:]) + " " + unix.ByteSliceToString(uts.Release[:])
	}
	return cpuModel, kernel
}

// selfCPUSource names where the loader's own CPU comes from.
const selfCPUSource = "getrusage(RUSAGE_SELF)"

// selfCPU is this process's CPU time, user + system of every thread, in seconds.
func selfCPU() (float64, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("bench: loader usage: %w", err)
	}
	tv := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime), nil
}

// machineCPU is the machine's busy CPU seconds since boot, summed over its CPUs: the
// first line of /proc/stat less idle and iowait.
//
//	cpu  user nice system idle iowait irq softirq steal guest guest_nice   (USER_HZ)
func machineCPU() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("bench: machine usage: %w", err)
	}
	return parseMachineStat(b)
}

func parseMachineStat(b []byte) (float64, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("bench: malformed /proc/stat")
	}
	var busy uint64
	for i, v := range f[1:9] { // user .. steal; guest is counted in user already
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: malformed /proc/stat")
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return float64(busy) / clockTicks, nil
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes (/proc/loadavg),
// zeros where it cannot be read.
func loadAvg() (l [3]float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}
