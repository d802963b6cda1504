package serve

import (
	"database/sql"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"os"

	"tokenbed/internal/resultsdb"
)

// Config is what the server reads.
type Config struct {
	// Results is the results root: every run's indexed directory is
	// relative to it, and nothing outside it is served.
	Results string
	// DB is the results database indexing Results.
	DB *resultsdb.DB
	// Log receives one line per failed request; nil: discarded.
	Log *slog.Logger
}

// Server serves the results browser.
type Server struct {
	db    *resultsdb.DB
	root  *os.Root
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New opens the results root and parses the pages. Close releases the
// root.
func New(c Config) (*Server, error) {
	if c.DB == nil {
		return nil, errors.New("serve: no results database")
	}
	root, err := os.OpenRoot(c.Results)
	if err != nil {
		return nil, fmt.Errorf("serve: results root: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		root.Close()
		return nil, err
	}
	s := &Server{db: c.DB, root: root, log: c.Log, pages: pages, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /campaigns/{id}", s.campaign)
	s.mux.HandleFunc("GET /runs/{id}", s.run)
	s.mux.HandleFunc("GET /runs/{id}/bundles/{name}", s.bundle)
	s.mux.HandleFunc("GET /runs/{id}/files/{path...}", s.file)
	s.mux.HandleFunc("GET /figures/{name}", s.figure)
	s.mux.HandleFunc("GET /trend", s.job)
	s.mux.HandleFunc("GET /compare", s.compare)
	return s, nil
}

// Close releases the results root.
func (s *Server) Close() error { return s.root.Close() }

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.mux.ServeHTTP(w, r)
}

// pageCSP allows the pages' own inline style and images from this
// server, and nothing else: no page has a script.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'"

// fileCSP is for files of the results directories, which the server did
// not write: a sandboxed origin, nothing runs.
const fileCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; sandbox"

// httpError is a failed request's status and what the page says.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func notFound(format string, a ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, a...)}
}

func forbidden(format string, a ...any) error {
	return &httpError{http.StatusForbidden, fmt.Sprintf(format, a...)}
}

func badRequest(format string, a ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

// fail writes err as a plain-text error: its own status for an
// httpError, 500 otherwise (logged).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{http.StatusInternalServerError, err.Error()}
	}
	s.log.Info("request failed", "path", r.URL.Path, "status", he.status, "err", he.msg)
	http.Error(w, he.msg, he.status)
}

// runByID is the indexed run, or a 404.
func (s *Server) runByID(id string) (resultsdb.Run, error) {
	run, err := s.db.RunByID(id)
	if errors.Is(err, sql.ErrNoRows) {
		return run, notFound("no run %q in the results database", id)
	}
	return run, err
}
