package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReportsInChromium renders every kind of report — run, compare (with limits),
// limits alone, regress — from real short runs, loads each page in headless Chromium
// and checks the DOM Chromium built: each expected section is there, every table in a
// section has a data row with text, every chart a drawn series or bar, every list an
// item; the whole command line is on the page; and a screenshot is not blank.
//
// Set SAMSA_REPORT_SHOTS=DIR to keep the pages and their screenshots there, to look at.
// Without Chromium (Debian's package chromium) the test skips.
func TestReportsInChromium(t *testing.T) {
	browser := chromiumPath()
	if browser == "" {
		t.Skip("chromium not installed (apt-get install chromium): rendered reports not checked")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := e2eWorkload(t)
	w.Warmup, w.Duration = 0, Duration(2*time.Second)
	spawn := SpawnOptions{SelfExe: self, WorkDir: t.TempDir()}
	// kfake in process and as a child (its CPU and RSS from /proc), client and raw.
	results, err := Compare(ctx, CompareConfig{Workload: w, Targets: []string{TargetKfake, TargetKfakeProc}, Rounds: 1, Spawn: spawn,
		Raw: true, RawConfig: RawConfig{Connections: 1, InFlight: 2, RecordsPerBatch: 100, Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	// The gate's A B on one broker, named as regress names its sides.
	ab, err := Compare(ctx, CompareConfig{Workload: w, Targets: []string{TargetKfakeProc, TargetKfakeProc}, Names: []string{"baseline", "current"}, Rounds: 1, Spawn: spawn})
	if err != nil {
		t.Fatal(err)
	}
	limits, err := MeasureLimits(filepath.Join(t.TempDir(), "limits"), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	verdict := &Verdict{Baseline: "HEAD~1", BaselineCommit: "0123456789abcdef", CurrentCommit: "fedcba9876543210", Mode: "client", Rounds: 1, Threshold: 0.5}
	judge(verdict, ab)

	command := CommandLine([]string{"samsa-bench", "compare", "--targets", "kfake,kfake-proc", "--workload", "e2e", "--raw", "--work-dir", "/tmp/a directory whose name is long enough to reach past the edge of the page/" + strings.Repeat("x", 120)})
	base := func(title string, rs []*Result) *Report {
		return &Report{Title: title, Command: command, Started: time.Now().UTC(), Machine: DescribeMachine(), Results: rs, Compare: Figures(rs)}
	}
	var kfakeOnly []*Result
	for _, r := range results {
		if r.Target == TargetKfakeProc {
			kfakeOnly = append(kfakeOnly, r)
		}
	}
	run := base("samsa-bench run: e2e", kfakeOnly)
	compare := base("samsa-bench compare: e2e", results)
	compare.Limits = limits
	limitsOnly := &Report{Title: "samsa-bench limits", Command: command, Started: time.Now().UTC(), Machine: DescribeMachine(), Limits: limits}
	regress := base("samsa-bench regress: e2e", ab)
	regress.Regress = verdict
	var lines []HistoryEntry
	for i, c := range []string{"1111111111111111", "2222222222222222"} {
		r := *regress
		r.Started = time.Now().Add(time.Duration(i) * time.Hour)
		lines = append(lines, HistoryEntries(&r, "regress", c, nil)...)
	}
	if regress.History, err = BuildHistory(lines, "p99.9", HistoryFilter{}); err != nil {
		t.Fatal(err)
	}

	common := []string{"verdict", "results", "runtime", "throughput", "latency", "percentile"}
	for _, tc := range []struct {
		name string
		rep  *Report
		want []string
	}{
		{"run", run, append(common, "broker-cpu")},
		{"compare", compare, append(common, "side-by-side", "broker-cpu", "limits")},
		{"limits", limitsOnly, []string{"verdict", "limits"}},
		{"regress", regress, append(common, "side-by-side", "broker-cpu", "regress", "history")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if keep := os.Getenv("SAMSA_REPORT_SHOTS"); keep != "" {
				dir = filepath.Join(keep, tc.name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			page := filepath.Join(dir, "report.html")
			if err := tc.rep.WriteHTMLFile(page); err != nil {
				t.Fatal(err)
			}
			dom := chromium(t, browser, "--dump-dom", "file://"+page)
			sections, text := renderedSections(t, dom)
			for _, name := range tc.want {
				if _, ok := sections[name]; !ok {
					t.Errorf("section %q is missing from the rendered page", name)
				}
			}
			if len(sections) != len(tc.want) {
				t.Errorf("sections %v, want %v", keys(sections), tc.want)
			}
			for name, s := range sections {
				if msg := s.empty(); msg != "" {
					t.Errorf("section %q renders empty: %s", name, msg)
				}
			}
			if !strings.Contains(text, command) {
				t.Errorf("the page does not show the whole command %q", command)
			}
			shot := filepath.Join(dir, "report.png")
			chromium(t, browser, "--screenshot="+shot, "--window-size=1280,2000", "file://"+page)
			checkNotBlank(t, shot)
		})
	}
}

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chromium runs the headless browser with a fresh profile and returns its stdout.
func chromium(t *testing.T, browser string, args ...string) []byte {
	t.Helper()
	profile := t.TempDir()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// renderedSection counts what one <section data-section> holds.
type renderedSection struct {
	tables, filledTables int // tables, and those with a <td> holding text
	charts, drawnCharts  int // <svg>, and those with a non-empty series or a bar of positive width
	lists, filledLists   int // <ul>, and those with an <li> holding text
}

func (s renderedSection) empty() string {
	switch {
	case s.tables+s.charts+s.lists == 0:
		return "no table, chart or list"
	case s.filledTables < s.tables:
		return strconv.Itoa(s.tables-s.filledTables) + " table(s) without a data row"
	case s.drawnCharts < s.charts:
		return strconv.Itoa(s.charts-s.drawnCharts) + " chart(s) with nothing drawn"
	case s.filledLists < s.lists:
		return strconv.Itoa(s.lists-s.filledLists) + " empty list(s)"
	}
	return ""
}

// renderedSections walks Chromium's serialised DOM (HTML, so parsed leniently) and
// returns each section's counts and the text of the whole page.
func renderedSections(t *testing.T, dom []byte) (map[string]renderedSection, string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(dom))
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	out := map[string]renderedSection{}
	var text strings.Builder
	var (
		cur                       string // current section
		depth, sectionDepth       int
		inTD, inLI                bool
		tdText, liText            strings.Builder
		tableFilled, listFilled   bool
		inTable, inList, inChart  bool
		chartDrawn                bool
		tableDepth, listDepth     int
		chartDepth, tdDepth, liDp int
	)
	attr := func(e xml.StartElement, n string) string {
		for _, a := range e.Attr {
			if a.Name.Local == n {
				return a.Value
			}
		}
		return ""
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("parsing the rendered DOM: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			depth++
			name := strings.ToLower(e.Name.Local)
			if name == "section" && attr(e, "data-section") != "" {
				cur, sectionDepth = attr(e, "data-section"), depth
				out[cur] = renderedSection{}
			}
			if cur == "" {
				continue
			}
			s := out[cur]
			switch {
			case name == "table" && !inTable:
				inTable, tableDepth, tableFilled = true, depth, false
				s.tables++
			case name == "td" && inTable:
				inTD, tdDepth = true, depth
				tdText.Reset()
			case name == "ul":
				inList, listDepth, listFilled = true, depth, false
				s.lists++
			case name == "li" && inList:
				inLI, liDp = true, depth
				liText.Reset()
			case name == "svg":
				inChart, chartDepth, chartDrawn = true, depth, false
				s.charts++
			case name == "polyline" && inChart && strings.Contains(attr(e, "class"), "series"):
				if strings.Count(strings.TrimSpace(attr(e, "points")), ",") >= 2 { // a line: two points or more
					chartDrawn = true
				}
			case name == "circle" && inChart && strings.Contains(attr(e, "class"), "point"):
				chartDrawn = true
			case name == "rect" && inChart && strings.Contains(attr(e, "class"), "bar"):
				if w, err := strconv.ParseFloat(attr(e, "width"), 64); err == nil && w > 0 {
					chartDrawn = true
				}
			}
			out[cur] = s
		case xml.CharData:
			text.Write(e)
			if inTD {
				tdText.Write(e)
			}
			if inLI {
				liText.Write(e)
			}
		case xml.EndElement:
			if cur != "" {
				s := out[cur]
				switch {
				case inTD && depth == tdDepth:
					inTD = false
					if strings.TrimSpace(tdText.String()) != "" {
						tableFilled = true
					}
				case inLI && depth == liDp:
					inLI = false
					if strings.TrimSpace(liText.String()) != "" {
						listFilled = true
					}
				case inTable && depth == tableDepth:
					inTable = false
					if tableFilled {
						s.filledTables++
					}
				case inList && depth == listDepth:
					inList = false
					if listFilled {
						s.filledLists++
					}
				case inChart && depth == chartDepth:
					inChart = false
					if chartDrawn {
						s.drawnCharts++
					}
				}
				out[cur] = s
				if depth == sectionDepth {
					cur = ""
				}
			}
			depth--
		}
	}
	return out, strings.Join(strings.Fields(text.String()), " ")
}

// checkNotBlank decodes the screenshot and wants a share of it not white.
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	ink, all := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			all++
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				ink++
			}
		}
	}
	if ink*200 < all { // under 0.5% of the page drawn
		t.Errorf("screenshot %s is blank (%d of %d sampled pixels drawn)", path, ink, all)
	}
}

func keys(m map[string]renderedSection) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
