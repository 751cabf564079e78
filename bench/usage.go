package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Broker cost comes from one of two places:
//
//   - /proc/<pid> of a local process (a spawned target, or --pid): CPU time from
//     stat, peak RSS from VmHWM (the kernel's high-water mark since the process began);
//   - the broker's Prometheus endpoint (--admin http://host:port): the client
//     library's process collector series process_cpu_seconds_total and
//     process_resident_memory_bytes. That RSS is the current value, so PeakRSS is the
//     largest one seen by this source's reads (about once a second during a run).

// ProcUsage measures a local process through /proc/<pid>.
type ProcUsage int

// Usage implements UsageSource.
func (p ProcUsage) Usage() (Usage, error) { return procUsage(int(p)) }

// String names the source in reports.
func (p ProcUsage) String() string { return fmt.Sprintf("/proc/%d", int(p)) }

// MetricsUsage measures a broker, local or not, through its Prometheus /metrics. It is
// safe for concurrent use.
type MetricsUsage struct {
	URL    string // the admin base URL, http://host:port; /metrics is appended
	Client *http.Client

	mu   sync.Mutex
	peak int64
}

// NewMetricsUsage returns a source reading adminURL + "/metrics" with a 2 s timeout.
func NewMetricsUsage(adminURL string) *MetricsUsage {
	return &MetricsUsage{URL: strings.TrimSuffix(adminURL, "/"), Client: &http.Client{Timeout: 2 * time.Second}}
}

// String names the source in reports.
func (m *MetricsUsage) String() string { return m.URL + "/metrics" }

// Usage implements UsageSource.
func (m *MetricsUsage) Usage() (Usage, error) {
	body, err := m.scrape()
	if err != nil {
		return Usage{}, err
	}
	vals, err := scrapeValues(bytes.NewReader(body), "process_cpu_seconds_total", "process_resident_memory_bytes")
	if err != nil {
		return Usage{}, fmt.Errorf("%w: broker usage from %s/metrics: %w", ErrTarget, m.URL, err)
	}
	m.mu.Lock()
	m.peak = max(m.peak, int64(vals[1]))
	peak := m.peak
	m.mu.Unlock()
	return Usage{CPUSeconds: vals[0], PeakRSS: peak, RSS: int64(vals[1])}, nil
}

// scrape reads the broker's /metrics page (at most 64 MiB).
func (m *MetricsUsage) scrape() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: broker metrics: %w", ErrTarget, err)
	}
	// The text format: no protobuf or OpenMetrics negotiation.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := m.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: broker metrics: %w", ErrTarget, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: broker metrics: GET %s/metrics: %s", ErrTarget, m.URL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: broker metrics: %w", ErrTarget, err)
	}
	return body, nil
}

// scrapeValues reads the Prometheus text format and returns the values of the
// unlabelled samples named, in order; a name that is absent is an error.
//
//	# HELP process_cpu_seconds_total ...
//	process_cpu_seconds_total 12.5
//	process_resident_memory_bytes 1.2345e+08 1700000000000   (optional timestamp)
func scrapeValues(r io.Reader, names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	found := make([]bool, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		for i, n := range names {
			if f[0] != n && f[0] != n+"{}" {
				continue
			}
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: bad value %q", n, f[1])
			}
			out[i], found[i] = v, true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for i, ok := range found {
		if !ok {
			missing = append(missing, names[i])
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no %s series", strings.Join(missing, ", "))
	}
	return out, nil
}

// usageSourceName is how reports name where a broker's cost came from.
func usageSourceName(u UsageSource) string {
	if s, ok := u.(fmt.Stringer); ok {
		return s.String()
	}
	return ""
}
