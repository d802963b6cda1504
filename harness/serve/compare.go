package serve

import (
	"io/fs"
	"net/http"
	"path"
	"path/filepath"

	"tokenbed/analysis"
	"tokenbed/analysis/crossval"
	"tokenbed/internal/resultsdb"
)

// comparePage is two runs side by side: the table `harness compare`
// prints (analysis/crossval), with its default levels.
type comparePage struct {
	A, B  resultsdb.Run
	Table crossval.Table
}

func (s *Server) compare(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("a") == "" || q.Get("b") == "" {
		s.fail(w, r, badRequest("compare: want two runs, ?a=RUNID&b=RUNID"))
		return
	}
	var p comparePage
	var ss [2]*analysis.Samples
	for i, id := range []string{q.Get("a"), q.Get("b")} {
		run, err := s.runByID(id)
		if err == nil {
			ss[i], err = s.samples(run)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if i == 0 {
			p.A = run
		} else {
			p.B = run
		}
	}
	p.Table = crossval.Compare(ss[0], ss[1], crossval.Options{})
	s.render(w, r, "compare", "compare "+p.A.ID+" and "+p.B.ID, p)
}

// samples reads a run's samples (analysis.ReadSamples) from its
// directory, once the directory is known to be inside the root and not
// a link out of it.
func (s *Server) samples(run resultsdb.Run) (*analysis.Samples, error) {
	if err := s.confined(run.Dir); err != nil {
		return nil, err
	}
	// ReadSamples reads by path: every link in the directory was just
	// checked to stay inside the root.
	sm, err := analysis.ReadSamples(filepath.Join(s.root.Name(), run.Dir))
	if err != nil {
		return nil, notFound("run %s: its samples cannot be read: %v", run.ID, err)
	}
	return sm, nil
}

// confined checks that the run directory dir and every symbolic link
// under it resolve inside the results root, for the readers that take a
// path (analysis.ReadSamples) rather than the root's files.
func (s *Server) confined(dir string) error {
	f, err := s.open(dir, ".")
	if err != nil {
		return err
	}
	f.Close()
	return fs.WalkDir(s.root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if _, err := s.root.Stat(p); err != nil {
				rel, _ := filepath.Rel(dir, p)
				return forbidden("%s: refused: a link that does not resolve inside the results root", path.Clean(rel))
			}
		}
		return nil
	})
}
