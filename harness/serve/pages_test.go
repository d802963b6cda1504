package serve

import (
	"io"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"tokenbed/internal/pcapread"
	"tokenbed/internal/resultsdb"
)

func newServer(t testing.TB, f *fixture) *Server {
	t.Helper()
	s, err := New(Config{Results: f.root, DB: f.db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// page gets path and fails the test unless it answers 200.
func page(t *testing.T, s *Server, path string) string {
	t.Helper()
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	if w.Code != 200 {
		t.Fatalf("GET %s: %d\n%s", path, w.Code, w.Body.String())
	}
	if csp := w.Header().Get("Content-Security-Policy"); strings.HasSuffix(w.Header().Get("Content-Type"), "html; charset=utf-8") && strings.Contains(csp, "script") {
		t.Fatalf("GET %s: the page's policy %q allows a script", path, csp)
	}
	return w.Body.String()
}

// runIDs are the run links of a page, in order.
func runIDs(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`<a href="/runs/(tb[0-9a-f]{6})">`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestPages walks the pages over seven simulated nights: the index and
// its filters, a campaign, the failed run with its failure bundle and
// decoded slice, a figure's trend with the planted slowdown marked at
// the night it started, and two runs side by side.
func TestPages(t *testing.T) {
	f := newFixture(t)
	s := newServer(t, f)

	all := page(t, s, "/")
	if got := runIDs(all); len(got) != 8 || got[0] != f.failed.runID {
		t.Errorf("index lists runs %v, want the 8 runs newest first (%s)", got, f.failed.runID)
	}
	if got := runIDs(page(t, s, "/?verdict=fail")); len(got) != 1 || got[0] != f.failed.runID {
		t.Errorf("verdict=fail lists %v, want only %s", got, f.failed.runID)
	}
	if got := runIDs(page(t, s, "/?revision=rev3&backend=sim&experiment=three-agents")); len(got) != 1 || got[0] != f.nights[2].runID {
		t.Errorf("revision=rev3 lists %v, want only %s", got, f.nights[2].runID)
	}
	if got := runIDs(page(t, s, "/?backend=netns")); len(got) != 0 {
		t.Errorf("backend=netns lists %v, want none", got)
	}

	camp := page(t, s, "/campaigns/night-7")
	if got := runIDs(camp); len(got) != 2 || !strings.Contains(camp, `<td class="failed">failed</td>`) {
		t.Errorf("campaign night-7: runs %v and no failed job in\n%s", got, camp)
	}

	run := page(t, s, "/runs/"+f.failed.runID)
	for _, want := range []string{
		`<td>latency</td><td class="fail">fail</td>`,
		`href="/runs/` + f.failed.runID + `/bundles/latency-1"`,
		`<img src="/runs/` + f.failed.runID + `/files/plots/latency_cdf.png"`,
		`href="/figures/latency_s.A%3EB%20p50?job=latency-check"`,
	} {
		if !strings.Contains(run, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
	// The paper's figure beside the run's: the experiment's A>B mean
	// (1 ms), which the run missed.
	if !regexp.MustCompile(`<tr><td>directions.A&gt;B.rescaled_mean_s</td><td class="num">0.02[0-9]*</td><td>s</td><td class="num"></td>\s*<td></td><td class="num">0.001</td>`).MatchString(run) {
		t.Errorf("run page does not show the paper's A>B mean (1 ms) beside the run's")
	}
	if last := page(t, s, "/runs/"+f.nights[6].runID); !strings.Contains(last, `href="/compare?a=`+f.nights[5].runID+`&amp;b=`+f.nights[6].runID+`"`) {
		t.Errorf("the last night's run page does not offer the night before it side by side")
	}
	png := page(t, s, "/runs/"+f.failed.runID+"/files/plots/latency_cdf.png")
	if !strings.HasPrefix(png, "\x89PNG") {
		t.Errorf("the plot is not served as the PNG the analysis wrote")
	}

	bundle := page(t, s, "/runs/"+f.failed.runID+"/bundles/latency-1")
	// The decoded slice is pcaptimeline's: token sections with their
	// Move, Ack and Commit lines.
	for _, want := range []string{"latency failed: A&gt;B", "Move", "Commit", `href="/runs/` + f.failed.runID + `/files/bundles/latency-1/slice.pcapng?download=1"`} {
		if !strings.Contains(bundle, want) {
			t.Errorf("bundle page lacks %q", want)
		}
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/runs/"+f.failed.runID+"/files/bundles/latency-1/slice.pcapng?download=1", nil))
	if packets, _ := readCapture(t, "the slice served", w.Body); packets == 0 {
		t.Errorf("the slice served holds no packet")
	}

	// The planted slowdown, judged by analysis/trend as harness trend
	// --job judges it: marked at the fifth night, with its revision.
	fig := page(t, s, figureURL("latency_s.A>B p50", resultsdb.Run{Job: trendJob}))
	marked := regexp.MustCompile(`<tr class="moved"><td>(night-\d)</td><td><a href="/runs/(tb[0-9a-f]{6})">`).FindAllStringSubmatch(fig, -1)
	if len(marked) != 1 || marked[0][2] != f.nights[4].runID {
		t.Errorf("figure page marks %v, want the fifth night's run %s only", marked, f.nights[4].runID)
	}
	if !strings.Contains(fig, "Regression") || !strings.Contains(fig, "revision <code>"+f.nights[4].revision+"</code>") {
		t.Errorf("figure page does not call it a regression from revision %s", f.nights[4].revision)
	}
	if got := runIDs(fig); len(got) != 7 {
		t.Errorf("figure page lists %d runs, want the 7 nights", len(got))
	}
	// The links the slowdown did not touch are not flagged.
	for _, name := range []string{"latency_s.B>C p50", "latency_s.A>C p50", "latency_s.C>B"} {
		if other := page(t, s, figureURL(name, resultsdb.Run{Job: trendJob})); strings.Contains(other, `class="moved"`) || !strings.Contains(other, "No move") {
			t.Errorf("%s: flagged, or not judged", name)
		}
	}
	// A figure of one value a night is shown, unmarked, and says why.
	one := page(t, s, figureURL("wall_seconds", resultsdb.Run{Job: trendJob}))
	if strings.Contains(one, `class="moved"`) || !strings.Contains(one, "One value a run") || len(runIDs(one)) != 7 {
		t.Errorf("wall_seconds: marked, or not said to be unjudged, or not 7 nights")
	}
	// Asked, as harness trend --scalar, it is judged: the runs' values as
	// each night's sample.
	scalar := page(t, s, "/figures/wall_seconds?job="+trendJob+"&scalar=wall_seconds")
	if !strings.Contains(scalar, "harness trend --job "+trendJob+" --scalar wall_seconds --all") || strings.Contains(scalar, "One value a run") {
		t.Errorf("wall_seconds with scalar=wall_seconds is not judged as harness trend --scalar judges it")
	}

	// The job's page: the slowed link's medians among the moves (A–B is
	// both directions), and nothing moved elsewhere.
	job := page(t, s, "/trend?job="+trendJob)
	if !strings.HasSuffix(strings.TrimSpace(job), "</html>") {
		t.Fatalf("the job's page is cut short")
	}
	moved := map[string]bool{}
	for _, m := range regexp.MustCompile(`<tr class="moved"><td><a href="[^"]*">([^<]*)</a>`).FindAllStringSubmatch(job, -1) {
		moved[m[1]] = true
		if !strings.HasPrefix(m[1], "latency_s.A&gt;B") && !strings.HasPrefix(m[1], "latency_s.B&gt;A") {
			t.Errorf("the job's page flags %s, which the slowdown did not touch", m[1])
		}
	}
	if !moved["latency_s.A&gt;B p50"] || !moved["latency_s.B&gt;A p50"] {
		t.Errorf("the job's page flags %v, want the A–B medians among them", moved)
	}
	if !strings.Contains(page(t, s, "/campaigns/night-7"), `href="/trend?job=`+trendJob+`"`) {
		t.Errorf("the campaign page does not link its job's trend")
	}

	cmp := page(t, s, "/compare?a="+f.nights[0].runID+"&b="+f.nights[4].runID)
	for _, want := range []string{"A&gt;B latency p50", "A&gt;B latency p99", "FAIL", `id="verdict"`} {
		if !strings.Contains(cmp, want) {
			t.Errorf("compare page lacks %q", want)
		}
	}
}

// TestPagesRefuse: unknown runs, campaigns, figures and bundles are 404,
// a compare without two runs a 400; a figure whose name holds a slash is
// found.
func TestPagesRefuse(t *testing.T) {
	s, _ := hostileRoot(t)
	for path, want := range map[string]int{
		"/runs/tbffffff":                     404,
		"/campaigns/none":                    404,
		"/figures/nothing":                   404,
		"/compare?a=tb000001":                400,
		"/trend":                             400,
		"/trend?job=nosuch":                  404,
		"/runs/tb000001/bundles/latency-404": 404,
		"/figures/" + url.PathEscape("ftn/leader failover p99") + "?experiment=three-agents": 200,
	} {
		if code, body := get(t, s, path); code != want {
			t.Errorf("GET %s: %d, want %d (%s)", path, code, want, body)
		}
	}
}

// readCapture reads a whole capture through internal/pcapread and
// returns its packets and interfaces, failing t if it does not parse.
func readCapture(t *testing.T, what string, r io.Reader) (packets, interfaces int) {
	t.Helper()
	rd, err := pcapread.NewReader(r)
	if err != nil {
		t.Fatalf("%s does not open as a capture: %v", what, err)
	}
	for {
		if _, err := rd.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		packets++
	}
	return packets, rd.NInterfaces()
}
