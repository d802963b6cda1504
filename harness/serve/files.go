package serve

import (
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// local checks that p is a path inside the results root: relative, not
// empty, with no ".." element at all (even one that stays inside).
// Symbolic links are the os.Root's to refuse.
func local(what, p string) error {
	if p == "" || strings.ContainsRune(p, 0) || strings.Contains(p, `\`) || !filepath.IsLocal(p) ||
		slices.Contains(strings.Split(p, "/"), "..") {
		return forbidden("%s %q: not a path inside the results root", what, p)
	}
	return nil
}

// open opens rel inside the run directory dir (both relative to the
// results root) through the root, which refuses any symbolic link that
// leads out of it.
func (s *Server) open(dir, rel string) (*os.File, error) {
	if err := local("run directory", dir); err != nil || filepath.Clean(dir) == "." {
		return nil, forbidden("run directory %q: not a directory inside the results root", dir)
	}
	if err := local("path", rel); err != nil {
		return nil, err
	}
	f, err := s.root.Open(filepath.Join(dir, rel))
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, notFound("%s: no such file in the run's directory", rel)
	default:
		// os.Root's refusal of an escaping link has no sentinel; every
		// other failure to open is as much a refusal to the client.
		return nil, forbidden("%s: refused: %v", rel, errors.Unwrap(err))
	}
}

// listDir lists the entries of rel in the run directory dir, sorted; a
// missing directory is empty.
func (s *Server) listDir(dir, rel string) ([]fs.DirEntry, error) {
	f, err := s.open(dir, rel)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	es, err := f.ReadDir(-1)
	slices.SortFunc(es, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return es, err
}

// textTypes are the results directory's text files, served as plain
// text whatever mime's table says.
var textTypes = map[string]bool{".md": true, ".txt": true, ".jsonl": true, ".yaml": true, ".crt": true, ".xml": true}

// file serves one file of a run's directory.
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	run, err := s.runByID(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rel := r.PathValue("path")
	f, err := s.open(run.Dir, rel)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !st.Mode().IsRegular() {
		s.fail(w, r, notFound("%s: not a file", rel))
		return
	}
	ext := strings.ToLower(path.Ext(rel))
	ct := mime.TypeByExtension(ext)
	switch {
	case textTypes[ext]:
		ct = "text/plain; charset=utf-8"
	case ext == ".pcapng" || ext == ".pcap":
		ct = "application/vnd.tcpdump.pcap"
	case ct == "":
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Security-Policy", fileCSP)
	if r.URL.Query().Get("download") != "" {
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": run.ID + "-" + strings.ReplaceAll(rel, "/", "-")}))
	}
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// isNotFound reports whether err is a 404.
func isNotFound(err error) bool {
	var he *httpError
	return errors.As(err, &he) && he.status == http.StatusNotFound
}
