package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tokenbed/internal/resultsdb"
)

// secret is a file beside the results root, which no request may read.
const secret = "the secret outside the results root"

// hostileRoot is a results root with one run, tb000001, whose directory
// holds a report, a plot and these links: out (to the secret beside the
// root), up (to the root's parent, a directory), inside (to the run's
// own report: allowed), and run directories in the database that leave
// the root.
func hostileRoot(t *testing.T) (*Server, string) {
	t.Helper()
	top := t.TempDir()
	if err := os.WriteFile(filepath.Join(top, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(top, "results")
	run := filepath.Join(root, "tb000001")
	for _, d := range []string{"plots", "bundles/latency-1"} {
		if err := os.MkdirAll(filepath.Join(run, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"report.md":                      "# report\n",
		"plots/overview.svg":             `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`,
		"bundles/latency-1/README.txt":   "latency failed\n",
		"bundles/latency-1/timeline.txt": "events\n",
	} {
		if err := os.WriteFile(filepath.Join(run, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{
		"out":            filepath.Join(top, "secret.txt"),
		"up":             "../..",
		"inside":         "report.md",
		"plots/leak.svg": filepath.Join(top, "secret.txt"),
		"bundles/out":    top,
	} {
		if err := os.Symlink(to, filepath.Join(run, link)); err != nil {
			t.Fatal(err)
		}
	}
	// A run directory that is itself a link out of the root.
	if err := os.Symlink(top, filepath.Join(root, "tb00000e")); err != nil {
		t.Fatal(err)
	}
	db, err := resultsdb.Open(filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	at := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	for id, dir := range map[string]string{
		"tb000001": "tb000001",
		"tb00000a": "../secret.txt",                           // dir leaves the root by ..
		"tb00000b": filepath.Join(top, "results", "tb000001"), // absolute
		"tb00000c": ".",                                       // the root itself
		"tb00000d": "tb000001/../../results/tb000001",
		"tb00000e": "tb00000e", // a link out
	} {
		// A figure whose name holds a slash and a space, as a path
		// into summary.json may.
		fig := []resultsdb.Figure{{Run: id, Name: "ftn/leader failover p99", Value: resultsdb.Val(1.5), Unit: "s"}}
		if err := db.PutRun(resultsdb.Indexed{Run: resultsdb.Run{ID: id, Experiment: "three-agents", Backend: "sim",
			Status: resultsdb.RunFail, Started: at, Dir: dir}, Figures: fig}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Config{Results: root, DB: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, top
}

// get serves a request for the raw path (sent as is, not cleaned) and
// returns the status and body.
func get(t *testing.T, h http.Handler, rawPath string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("GET", "http://localhost/", nil)
	r.URL.Path, r.URL.RawPath = "", ""
	u, err := r.URL.Parse(rawPath)
	if err != nil {
		t.Fatalf("%s: %v", rawPath, err)
	}
	r.URL = u
	r.RequestURI = rawPath
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

// TestHostilePaths: no request reads a byte from outside the results
// root, by "..", an absolute path, a link out or a run directory out;
// a link that stays inside is followed.
func TestHostilePaths(t *testing.T) {
	s, _ := hostileRoot(t)
	for _, c := range []struct {
		path string
		want int
	}{
		{"/runs/tb000001/files/report.md", 200},
		{"/runs/tb000001/files/inside", 200},
		{"/runs/tb000001/files/out", 403},
		{"/runs/tb000001/files/up/secret.txt", 403},
		{"/runs/tb000001/files/plots/leak.svg", 403},
		{"/runs/tb000001/files/..%2f..%2fsecret.txt", 403},
		{"/runs/tb000001/files/plots%2f..%2f..%2f..%2fsecret.txt", 403},
		{"/runs/tb000001/files/%2e%2e/%2e%2e/secret.txt", 403},
		{"/runs/tb000001/files/plots/%2e%2e/report.md", 403}, // ".." even inside
		{"/runs/tb000001/files/%2fetc%2fpasswd", 403},
		{"/runs/tb000001/files//etc/passwd", 403},
		{"/runs/tb000001/files/a%00b", 403},
		{"/runs/tb000001/files/nothing.txt", 404},
		{"/runs/tb000001/files/plots", 404}, // a directory is not a file
		{"/runs/tb00000a/files/report.md", 403},
		{"/runs/tb00000b/files/report.md", 403},
		{"/runs/tb00000c/files/tb000001/report.md", 403},
		{"/runs/tb00000d/files/report.md", 403},
		{"/runs/tb00000e/files/secret.txt", 403},
		{"/runs/tb00000e", 200}, // the page, saying what it could not list
		{"/runs/tb000001/bundles/..%2f..%2f..", 403},
		{"/runs/tb000001/bundles/out", 403},
		{"/runs/tb000001/bundles/nosuch", 404},
		{"/runs/tb000001/bundles/latency-1", 200},
		{"/runs/nosuch/files/report.md", 404},
		{"/compare?a=tb00000e&b=tb000001", 403},
		{"/compare?a=tb000001&b=tb000001", 403}, // links out inside the run: its samples are read by path
	} {
		code, body := get(t, s, c.path)
		// The mux answers a path it would clean with a redirect to the
		// cleaned path: that serves nothing (TestRedirectStaysInside
		// follows one).
		if code != c.want && !(c.want == 403 && code/100 == 3) {
			t.Errorf("GET %s: %d, want %d (%s)", c.path, code, c.want, strings.TrimSpace(body))
		}
		if strings.Contains(body, secret) {
			t.Errorf("GET %s: the body holds the secret outside the root", c.path)
		}
	}
}

// TestRedirectStaysInside: where the mux cleans a path with ".." by a
// redirect, the cleaned path is inside the root or refused.
func TestRedirectStaysInside(t *testing.T) {
	s, _ := hostileRoot(t)
	for _, p := range []string{"/runs/tb000001/files/../../../secret.txt", "/runs/tb000001/files//etc/passwd"} {
		r := httptest.NewRequest("GET", p, nil)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code == 200 || strings.Contains(w.Body.String(), secret) {
			t.Fatalf("GET %s: %d %q", p, w.Code, w.Body.String())
		}
		loc := w.Header().Get("Location")
		if w.Code/100 != 3 || loc == "" {
			continue
		}
		code, body := get(t, s, loc)
		if code == 200 || strings.Contains(body, secret) {
			t.Fatalf("GET %s: redirected to %s, which answers %d", p, loc, code)
		}
	}
}

// TestFileHeaders: a file from a run directory is served under a
// sandboxing policy (an SVG plot may hold a script), as text when it is
// text, and as an attachment when asked.
func TestFileHeaders(t *testing.T) {
	s, _ := hostileRoot(t)
	for _, c := range []struct{ path, ctype, disp string }{
		{"/runs/tb000001/files/plots/overview.svg", "image/svg+xml", ""},
		{"/runs/tb000001/files/report.md", "text/plain; charset=utf-8", ""},
		{"/runs/tb000001/files/bundles/latency-1/README.txt?download=1", "text/plain; charset=utf-8", `attachment; filename=tb000001-bundles-latency-1-README.txt`},
	} {
		r := httptest.NewRequest("GET", c.path, nil)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		h := w.Result().Header
		if w.Code != 200 || h.Get("Content-Type") != c.ctype || h.Get("Content-Disposition") != c.disp {
			t.Errorf("GET %s: %d, type %q, disposition %q; want 200 %q %q", c.path, w.Code, h.Get("Content-Type"), h.Get("Content-Disposition"), c.ctype, c.disp)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: content security policy %q, want a sandbox with nothing allowed by default", c.path, csp)
		}
	}
}
