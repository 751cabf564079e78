package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDashboardOnPrometheus loads the Grafana dashboard's queries into a real
// Prometheus (Debian's prometheus package; skipped without it) scraping a node after
// the metrics workload: every query must parse as PromQL and return at least one
// series. Grafana's variables are replaced as the dashboard's "All" would
// ($instance, $topic, $group: .*) and $__rate_interval by 1m.
func TestDashboardOnPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("no prometheus binary (apt-get install prometheus): the dashboard's queries are checked against the scrape only (TestMetrics)")
	}
	nd, _ := metricsWorkloadNode(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: samsa\n    static_configs:\n      - targets: [%q]\n", nd.AdminAddr())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddrs(t, 1)[0]
	var out syncBuffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	query := func(expr string) (n int, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/query?query="+url.QueryEscape(expr), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return 0, err
		}
		if r.Status != "success" {
			return 0, fmt.Errorf("%s: %s", r.Status, r.Error)
		}
		return len(r.Data.Result), nil
	}
	// Rates need two samples in their window: wait for three scrapes of the workload.
	waitFor(t, 60*time.Second, "prometheus has scraped the node three times", func() error {
		n, err := query(`count_over_time(samsa_topic_bytes_in_total{topic="metrics-t"}[1m]) >= 3`)
		if err == nil && n == 0 {
			err = fmt.Errorf("not yet")
		}
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out.String())
		}
		return nil
	})
	body, err := os.ReadFile("../../deploy/grafana/samsa.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*", "$topic", ".*", "$group", ".*")
	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			queries++
			expr := vars.Replace(tg.Expr)
			n, err := query(expr)
			switch {
			case err != nil:
				t.Errorf("panel %q: %s: %v", p.Title, expr, err)
			case n == 0 && !slices.ContainsFunc(afterAnEvent, func(name string) bool { return strings.Contains(expr, name) }):
				t.Errorf("panel %q: %s: no series", p.Title, expr)
			}
		}
	}
	t.Logf("%d dashboard queries answered by prometheus", queries)
}
