package serve

import (
	"bytes"
	"context"
	"flag"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"tokenbed/internal/resultsdb"
	"tokenbed/internal/testenv"
)

var screenshots = flag.String("screenshots", "", "write PNG screenshots of the main pages into this `directory` (docs/images)")

// newBrowser starts a headless Chromium for t (sandboxed unless root,
// where Chromium refuses its sandbox) and stops it when t ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := testenv.RequireChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 850))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	// The browser lives at most three minutes: a Chromium that hangs at
	// start fails the test instead of holding it to go test's timeout.
	life, cancelLife := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc() // kills the browser and waits for it
		cancelLife()
	})
	// Start it now, with no deadline (a deadline on the first action
	// would bound the browser's life), so that one that cannot start
	// fails here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// step runs actions with a deadline, failing t with what was being done.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one action that returns a value, with a deadline.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestBrowser drives Debian's Chromium over the pages of seven
// simulated nights: from the campaign page to a failing run and its
// failure bundle, to a figure's trend with the planted slowdown marked,
// and the download of a capture slice, which must parse.
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	f := newFixture(t)
	srv := httptest.NewServer(newServer(t, f))
	t.Cleanup(srv.Close)

	t.Run("campaign to failure bundle", func(t *testing.T) {
		step(t, ctx, "open the index and follow the failed campaign",
			chromedp.Navigate(srv.URL+"/"),
			chromedp.Click(`//table[@id="campaigns"]//tr[td[@class="failed"]]//a`),
			chromedp.WaitVisible(chromedp.CSS(`#jobs`)))
		step(t, ctx, "follow the failing run",
			chromedp.Click(`//table[@id="runs"]//tr[td[@class="fail"]]//a[starts-with(@href,"/runs/")]`),
			chromedp.WaitVisible(chromedp.CSS(`#checks`)))
		status := value(t, ctx, "read its verdict", chromedp.Text(chromedp.CSS(`#status`)))
		step(t, ctx, "follow its failure bundle",
			chromedp.Click(chromedp.CSS(`#bundles a`)),
			chromedp.WaitVisible(chromedp.CSS(`#pcap-timeline`)))
		timeline := value(t, ctx, "read the decoded slice", chromedp.Text(chromedp.CSS(`#pcap-timeline`)))
		loc := value(t, ctx, "read the location", chromedp.Location())
		if status != "fail" {
			t.Errorf("the run followed says %q, want fail", status)
		}
		if want := srv.URL + "/runs/" + f.failed.runID + "/bundles/latency-1"; loc != want {
			t.Errorf("landed on %s, want %s", loc, want)
		}
		if !strings.Contains(timeline, "Move") || !strings.Contains(timeline, "Commit") {
			t.Errorf("the bundle's decoded slice shows no Move and Commit:\n%s", timeline)
		}
	})

	t.Run("filter the runs by verdict", func(t *testing.T) {
		step(t, ctx, "choose verdict fail and filter",
			chromedp.Navigate(srv.URL+"/"),
			chromedp.SetValue(chromedp.CSS(`select[name="verdict"]`), "fail"),
			chromedp.Click(chromedp.CSS(`form.filters button`)))
		// The click submits the form: wait for the filtered page itself,
		// not the #runs of the page the click left.
		for deadline := time.Now().Add(20 * time.Second); ; {
			loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
				`location.search.includes("verdict=fail") && document.readyState === "complete" && document.querySelector("#runs") !== null`))
			if err == nil && loaded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the filtered page did not load: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		loc := value(t, ctx, "read the location", chromedp.Location())
		rows := value(t, ctx, "count the runs listed", chromedp.Evaluate[int](`document.querySelectorAll("#runs tr td:first-child a").length`))
		first := value(t, ctx, "read the run listed", chromedp.Text(chromedp.CSS(`#runs tr td:first-child a`)))
		if !strings.Contains(loc, "verdict=fail") || rows != 1 || first != f.failed.runID {
			t.Errorf("at %s, %d runs listed, the first %s; want only %s", loc, rows, first, f.failed.runID)
		}
	})

	t.Run("trend with the planted slowdown", func(t *testing.T) {
		step(t, ctx, "open a night's run and follow its figure's trend",
			chromedp.Navigate(srv.URL+"/runs/"+f.nights[6].runID),
			chromedp.Click(`//table[@id="samples"]//a[.="latency_s.A>B p50"]`),
			chromedp.WaitVisible(chromedp.CSS(`#series`)))
		marked := value(t, ctx, "read the marked row", chromedp.Text(chromedp.CSS(`tr.moved`)))
		// The mark must show, not only be in the markup.
		bg := value(t, ctx, "read the row's colour",
			chromedp.Evaluate[string](`getComputedStyle(document.querySelector("tr.moved td")).backgroundColor`))
		circles := value(t, ctx, "count the red points", chromedp.Evaluate[int](`document.querySelectorAll("svg circle.moved").length`))
		n := f.nights[4]
		if !strings.Contains(marked, n.runID) || !strings.Contains(marked, "moved: revision "+n.revision) {
			t.Errorf("the marked row is %q, want the fifth night %s moved at %s", marked, n.runID, n.revision)
		}
		if bg != "rgb(253, 231, 228)" || circles != 1 {
			t.Errorf("the mark is not shown: row background %s, %d red points on the chart", bg, circles)
		}
	})

	t.Run("download the capture slice", func(t *testing.T) {
		dir := t.TempDir()
		done := make(chan string, 1)
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		if err := chromedp.ListenBrowser(lctx, func(ev any) {
			if e, ok := ev.(*browser.EventDownloadProgress); ok && e.State == browser.DownloadProgressStateCompleted {
				select {
				case done <- e.GUID:
				default:
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: new(true)}); err != nil {
			t.Fatal(err)
		}
		step(t, ctx, "open the bundle and download its slice",
			chromedp.Navigate(srv.URL+"/runs/"+f.failed.runID+"/bundles/latency-1"),
			chromedp.Click(chromedp.CSS(`#download-slice`)))
		var guid string
		select {
		case guid = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the download did not complete")
		}
		got, err := os.ReadFile(filepath.Join(dir, guid))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(f.root, f.failed.runID, "bundles/latency-1/slice.pcapng"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("downloaded %d bytes, the slice has %d", len(got), len(want))
		}
		packets, ifaces := readCapture(t, "the downloaded slice", bytes.NewReader(got))
		if packets == 0 || ifaces == 0 {
			t.Errorf("the downloaded slice holds %d packets on %d interfaces", packets, ifaces)
		}
	})

	if *screenshots != "" {
		shoot(t, ctx, srv.URL, f, *screenshots)
	}
}

// shoot writes a screenshot of each main page into dir.
func shoot(t *testing.T, ctx context.Context, base string, f *fixture, dir string) {
	for name, path := range map[string]string{
		"serve-index":    "/",
		"serve-campaign": "/campaigns/night-7",
		"serve-run":      "/runs/" + f.failed.runID,
		"serve-bundle":   "/runs/" + f.failed.runID + "/bundles/latency-1",
		"serve-trend":    figureURL("latency_s.A>B p50", resultsdb.Run{Job: trendJob}),
		"serve-job":      "/trend?job=" + trendJob,
		"serve-compare":  "/compare?a=" + f.nights[3].runID + "&b=" + f.nights[4].runID,
	} {
		step(t, ctx, "open "+path, chromedp.Navigate(base+path))
		shot := value(t, ctx, "screenshot "+path, chromedp.CaptureScreenshot())
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		// A 256-colour palette keeps the PNGs small for the docs.
		pal := image.NewPaletted(img.Bounds(), palette.Plan9)
		draw.FloydSteinberg.Draw(pal, img.Bounds(), img, image.Point{})
		var b bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&b, pal); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
