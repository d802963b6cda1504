package serve

import (
	"bytes"
	"io"
	"net/http"
	"path"

	"tokenbed/analysis/pcaptimeline"
)

// bundleText bounds what the page shows of a bundle's text files: the
// whole file stays a link away.
const bundleText = 1 << 20

// bundlePage is one failure bundle.
type bundlePage struct {
	Run, Name string
	README    string
	Timeline  string // the decoded slice, as `harness pcap` prints it
	DecodeErr string
	Events    string // timeline.txt: the agents' and the harness's events
	Slice     string // the slice's path in the run directory, "" if none
}

// bundle serves one failure bundle: its README, the capture slice
// decoded by analysis/pcaptimeline (as `harness pcap` prints it) with a
// link to the slice itself, and the events around the violation.
func (s *Server) bundle(w http.ResponseWriter, r *http.Request) {
	run, err := s.runByID(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	if err := local("bundle", name); err != nil {
		s.fail(w, r, err)
		return
	}
	dir := path.Join("bundles", name)
	p := bundlePage{Run: run.ID, Name: name}
	es, err := s.listDir(run.Dir, dir)
	if err == nil && es == nil {
		err = notFound("run %s has no bundle %q", run.ID, name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"README.txt", &p.README}, {"timeline.txt", &p.Events}} {
		if *f.to, err = s.readText(run.Dir, path.Join(dir, f.name)); err != nil {
			*f.to = err.Error()
		}
	}
	slice := path.Join(dir, "slice.pcapng")
	if f, err := s.open(run.Dir, slice); err == nil {
		p.Slice = slice
		tl, err := pcaptimeline.Read(f, pcaptimeline.Options{})
		f.Close()
		var b bytes.Buffer
		if err == nil {
			tl.Name = slice
			err = tl.WriteText(&b)
		}
		if err != nil {
			p.DecodeErr = err.Error()
		}
		p.Timeline = b.String()
	}
	s.render(w, r, "bundle", "bundle "+name+" of "+run.ID, p)
}

// readText reads up to bundleText bytes of rel in the run directory.
func (s *Server) readText(dir, rel string) (string, error) {
	f, err := s.open(dir, rel)
	if isNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, bundleText))
	return string(b), err
}
