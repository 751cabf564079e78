package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// maxProfileBytes bounds a downloaded profile.
const maxProfileBytes = 64 << 20

// ProfileSummary is one profile pulled from a broker.
type ProfileSummary struct {
	Kind  string    `json:"kind"` // cpu or heap
	Path  string    `json:"path"` // where the raw profile was stored
	Total string    `json:"total"`
	Top   []TopFunc `json:"top"`
}

// TopFunc is one row of a top-functions table.
type TopFunc struct {
	Name    string  `json:"name"`
	Flat    int64   `json:"flat"`
	FlatPct float64 `json:"flat_pct"`
	Cum     int64   `json:"cum"`
	CumPct  float64 `json:"cum_pct"`
}

// Profiler pulls CPU and heap profiles from a broker's /debug/pprof.
type Profiler struct {
	AdminURL string        // http://host:port
	Dir      string        // where profiles are stored
	CPUTime  time.Duration // CPU profile length (default 10s)
	Prefix   string        // file name prefix, e.g. target-round
	Client   *http.Client

	Results []ProfileSummary // valid after Wait
	Err     error            // valid after Wait

	once sync.Once
	done chan struct{}
}

func (p *Profiler) init() { p.once.Do(func() { p.done = make(chan struct{}) }) }

// Wait blocks until Capture has finished or timeout passes.
func (p *Profiler) Wait(timeout time.Duration) error {
	p.init()
	select {
	case <-p.done:
		return p.Err
	case <-time.After(timeout):
		return fmt.Errorf("bench: profile capture did not finish within %v", timeout)
	}
}

// Capture takes a CPU profile of CPUTime, then a heap profile; results land in
// p.Results. Call it once.
func (p *Profiler) Capture(ctx context.Context) {
	p.init()
	defer close(p.done)
	if p.CPUTime == 0 {
		p.CPUTime = 10 * time.Second
	}
	if p.Client == nil {
		p.Client = &http.Client{Timeout: p.CPUTime + 30*time.Second}
	}
	secs := max(1, int(p.CPUTime/time.Second))
	for _, k := range []struct{ kind, path string }{
		{"cpu", fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs)},
		{"heap", "/debug/pprof/heap"},
	} {
		s, err := p.fetch(ctx, k.kind, k.path)
		if err != nil {
			p.Err = err
			return
		}
		p.Results = append(p.Results, s)
	}
}

func (p *Profiler) fetch(ctx context.Context, kind, path string) (ProfileSummary, error) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, p.AdminURL+path, nil)
	if err != nil {
		return ProfileSummary{}, fmt.Errorf("bench: profile: %w", err)
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return ProfileSummary{}, fmt.Errorf("bench: profile %s: %w", kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ProfileSummary{}, fmt.Errorf("bench: profile %s: HTTP %s", kind, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProfileBytes))
	if err != nil {
		return ProfileSummary{}, fmt.Errorf("bench: profile %s: %w", kind, err)
	}
	out := filepath.Join(p.Dir, p.Prefix+kind+".pb.gz")
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return ProfileSummary{}, fmt.Errorf("bench: profile: %w", err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return ProfileSummary{}, fmt.Errorf("bench: profile: %w", err)
	}
	s, err := SummarizeProfile(bytes.NewReader(b), kind, 15)
	s.Path = out
	return s, err
}

// SummarizeProfile parses a pprof profile and returns its top n functions by flat
// value, using the last sample type (cpu nanoseconds; heap inuse_space).
func SummarizeProfile(r io.Reader, kind string, n int) (ProfileSummary, error) {
	prof, err := profile.Parse(r)
	if err != nil {
		return ProfileSummary{Kind: kind}, fmt.Errorf("bench: parse %s profile: %w", kind, err)
	}
	vi := len(prof.SampleType) - 1
	if kind == "heap" {
		for i, st := range prof.SampleType {
			if st.Type == "inuse_space" {
				vi = i
			}
		}
	}
	if vi < 0 {
		return ProfileSummary{Kind: kind}, fmt.Errorf("bench: %s profile has no sample types", kind)
	}
	flat := map[string]int64{}
	cum := map[string]int64{}
	var total int64
	for _, s := range prof.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		for i, loc := range s.Location {
			for j, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if i == 0 && j == 0 {
					flat[name] += v
				}
				if !seen[name] {
					cum[name] += v
					seen[name] = true
				}
			}
		}
	}
	sum := ProfileSummary{Kind: kind, Total: fmt.Sprintf("%d %s", total, prof.SampleType[vi].Unit)}
	for name, f := range flat {
		sum.Top = append(sum.Top, TopFunc{Name: name, Flat: f, Cum: cum[name]})
	}
	sort.Slice(sum.Top, func(i, j int) bool {
		if sum.Top[i].Flat != sum.Top[j].Flat {
			return sum.Top[i].Flat > sum.Top[j].Flat
		}
		return sum.Top[i].Name < sum.Top[j].Name
	})
	if len(sum.Top) > n {
		sum.Top = sum.Top[:n]
	}
	for i := range sum.Top {
		if total > 0 {
			sum.Top[i].FlatPct = 100 * float64(sum.Top[i].Flat) / float64(total)
			sum.Top[i].CumPct = 100 * float64(sum.Top[i].Cum) / float64(total)
		}
	}
	return sum, nil
}

// WriteTop prints a profile's top functions.
func (s ProfileSummary) WriteTop(w io.Writer) {
	fmt.Fprintf(w, "%s profile (%s), total %s\n", s.Kind, s.Path, s.Total)
	fmt.Fprintf(w, "  %7s %7s  %s\n", "flat%", "cum%", "function")
	for _, t := range s.Top {
		fmt.Fprintf(w, "  %6.2f%% %6.2f%%  %s\n", t.FlatPct, t.CumPct, t.Name)
	}
}
