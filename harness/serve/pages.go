package serve

import (
	"bytes"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"tokenbed/internal/resultsdb"
)

//go:embed templates/*.html
var templates embed.FS

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"short": func(rev string) string {
		if len(rev) > 12 {
			return rev[:12]
		}
		return rev
	},
	"pathEscape": url.PathEscape,
	"figureURL":  figureURL,
	"num": func(v any) string {
		switch x := v.(type) {
		case float64:
			return fmt.Sprintf("%.6g", x)
		}
		return fmt.Sprint(v)
	},
}

// parsePages parses each page with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templates, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("serve: template %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
}

// render writes page with data, under title; a template error is a 500
// before anything is written.
func (s *Server) render(w http.ResponseWriter, r *http.Request, page, title string, data any) {
	var b bytes.Buffer
	err := s.pages[page].Execute(&b, struct {
		Title string
		Page  any
	}{title, data})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	w.Write(b.Bytes())
}

// indexPage is the campaigns and the filtered runs.
type indexPage struct {
	Filter    resultsdb.RunFilter
	Facets    resultsdb.Facets
	Campaigns []resultsdb.Campaign
	Runs      []resultsdb.Run
	Limit     int
}

// indexLimit bounds the runs listed on the first page: a filter narrows.
const indexLimit = 500

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := indexPage{Limit: indexLimit, Filter: resultsdb.RunFilter{Campaign: q.Get("campaign"), Experiment: q.Get("experiment"),
		Backend: q.Get("backend"), Status: q.Get("verdict"), Revision: q.Get("revision"), Limit: indexLimit}}
	var err error
	if p.Facets, err = s.db.RunFacets(); err == nil {
		if p.Campaigns, err = s.db.Campaigns(); err == nil {
			p.Runs, err = s.db.Runs(p.Filter)
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "index", "results", p)
}

// campaignPage is one campaign.
type campaignPage struct {
	Campaign resultsdb.Campaign
	Jobs     []resultsdb.Job
	Runs     []resultsdb.Run
}

func (s *Server) campaign(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, err := s.db.CampaignByID(id)
	if errors.Is(err, sql.ErrNoRows) {
		err = notFound("no campaign %q in the results database", id)
	}
	p := campaignPage{Campaign: c}
	if err == nil {
		if p.Jobs, err = s.db.Jobs(id); err == nil {
			p.Runs, err = s.db.Runs(resultsdb.RunFilter{Campaign: id})
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "campaign", "campaign "+id, p)
}

// runPage is one run.
type runPage struct {
	Run      resultsdb.Run
	Checks   []resultsdb.Check
	Figures  []resultsdb.Figure
	Plots    []string // paths relative to the run directory
	Bundles  []string // bundle names
	Files    []string // the run directory's top-level files
	Previous string   // the run of the same job or experiment before this one
	// Samples are the run's stored samples, each with the trend series
	// it gives (its distribution and quantiles), for a run of a job.
	Samples []sampleLinks
}

// sampleLinks is one stored sample and its trend series' names.
type sampleLinks struct {
	Name    string
	Figures []string
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	run, err := s.runByID(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := runPage{Run: run}
	if p.Checks, err = s.db.Checks(run.ID); err == nil {
		if p.Figures, err = s.db.Figures(run.ID); err == nil {
			p.Previous, err = s.db.PreviousRun(run)
		}
	}
	var names []string
	if err == nil && run.Job != "" {
		names, err = s.db.SampleNames(run.ID)
	}
	for _, n := range names {
		p.Samples = append(p.Samples, sampleLinks{Name: n, Figures: sampleFigures(n)})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The directory may be gone or damaged: the page still shows what
	// the database holds, and says what it could not list.
	var dirErrs []string
	for _, d := range []struct {
		rel string
		add func(fs.DirEntry)
	}{
		{".", func(e fs.DirEntry) {
			if e.Type().IsRegular() {
				p.Files = append(p.Files, e.Name())
			}
		}},
		{"plots", func(e fs.DirEntry) {
			if ext := path.Ext(e.Name()); e.Type().IsRegular() && (ext == ".png" || ext == ".svg") {
				p.Plots = append(p.Plots, "plots/"+e.Name())
			}
		}},
		{"bundles", func(e fs.DirEntry) {
			if e.IsDir() {
				p.Bundles = append(p.Bundles, e.Name())
			}
		}},
	} {
		es, err := s.listDir(run.Dir, d.rel)
		if err != nil {
			dirErrs = append(dirErrs, err.Error())
			continue
		}
		for _, e := range es {
			d.add(e)
		}
	}
	if len(dirErrs) > 0 && run.Damaged == "" {
		p.Run.Damaged = strings.Join(dirErrs, "; ")
	}
	s.render(w, r, "run", "run "+run.ID, p)
}
