package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"testing"
	"time"
)

// TestProfilerCapture pulls a real CPU and heap profile of this process over HTTP
// and summarises them.
func TestProfilerCapture(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.Handle("/debug/pprof/heap", pprof.Handler("heap"))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	stop := make(chan struct{})
	defer close(stop)
	go func() { // something to sample
		x := 0
		for {
			select {
			case <-stop:
				return
			default:
				for i := 0; i < 1e5; i++ {
					x += i * i
				}
			}
		}
	}()
	p := &Profiler{AdminURL: srv.URL, Dir: t.TempDir(), CPUTime: time.Second, Prefix: "t-"}
	go p.Capture(context.Background())
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if len(p.Results) != 2 || p.Results[0].Kind != "cpu" || p.Results[1].Kind != "heap" {
		t.Fatalf("results %+v", p.Results)
	}
	cpu := p.Results[0]
	if len(cpu.Top) == 0 || cpu.Top[0].FlatPct <= 0 || cpu.Top[0].CumPct < cpu.Top[0].FlatPct {
		t.Errorf("cpu top %+v", cpu.Top)
	}
	if _, err := os.Stat(cpu.Path); err != nil {
		t.Error(err)
	}
}

func TestProfilerHTTPError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	p := &Profiler{AdminURL: srv.URL, Dir: t.TempDir(), CPUTime: time.Second}
	go p.Capture(context.Background())
	if err := p.Wait(10 * time.Second); err == nil {
		t.Fatal("want an error from a 404")
	}
}
