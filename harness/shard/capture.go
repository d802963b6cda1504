package shard

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/capturefile"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
)

// record is one capture record of a shard, copied out of its reader.
type record struct {
	t     time.Time
	rank  int
	iface int    // merged interface index; -1 for an annotation
	data  []byte // the packet, or the annotation's JSON
}

// shardCapture is one shard's capture being read.
type shardCapture struct {
	dir    string
	f      *os.File
	r      *pcapread.Reader
	first  *pcapread.Packet // read ahead to learn every interface
	global map[int]int      // its interface → merged index
	rankOf map[int]int      // its interface → replica
}

// mergeCapture writes capture.pcapng from the shards': every agent
// interface kept (name, description, link type) in shard order, which is
// the whole run's, their records interleaved as the harness log's, and
// the interface statistics with each shard's drops. A shard without a
// capture is an error: its packets would be missing from every check.
func mergeCapture(shards []Shard, out string) error {
	var cs []*shardCapture
	defer func() {
		for _, c := range cs {
			c.f.Close()
		}
	}()
	var idbs []pcapgo.NgInterface
	var comment string
	for _, s := range shards {
		c, err := openCapture(s.Dir)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		if comment == "" {
			comment = c.r.Section().Comment
		}
		for i := 0; i < c.r.NInterfaces(); i++ {
			b, err := c.r.Block(i)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", s.Dir, results.CaptureFile, err)
			}
			if b.LinkType == capturefile.LinkTypeUpperPDU {
				continue
			}
			inst, _, _ := strings.Cut(b.Name, "/")
			_, rep := results.ParseInstance(inst)
			c.global[i], c.rankOf[i] = len(idbs), rep
			idbs = append(idbs, pcapgo.NgInterface{Name: b.Name, Comment: b.Comment, Description: b.Description, LinkType: b.LinkType,
				OS: b.OS, SnapLength: b.SnapLength})
		}
	}
	f, err := os.OpenFile(filepath.Join(out, results.CaptureFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	w, err := capturefile.NewWriterInterfaces(bw, idbs, comment)
	if err != nil {
		f.Close()
		return err
	}
	var lv runLevel
	var ss []*stream[record]
	for _, c := range cs {
		ss = append(ss, &stream[record]{next: func() (record, bool, error) { return c.next(&lv) }})
	}
	emit := func(rec record) error {
		if rec.iface < 0 {
			return w.AnnotateJSON(rec.t, rec.data)
		}
		return w.Packet(rec.iface, rec.t, rec.data)
	}
	err = mergeStreams(ss, func(r record) (int64, int) { return r.t.UnixNano(), r.rank }, emit)
	if fin := lv.finish(); err == nil && fin != nil {
		var js []byte
		if js, err = json.Marshal(fin); err == nil {
			err = w.AnnotateJSON(time.Unix(0, fin.WallNS), js)
		}
	}
	for _, c := range cs {
		for _, st := range c.r.Stats().Statistics {
			if g, ok := c.global[st.Iface]; ok && st.HasDropped {
				w.AddDropped(g, st.Dropped)
			}
		}
	}
	if err == nil {
		_, err = w.Stop()
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func openCapture(dir string) (*shardCapture, error) {
	path := filepath.Join(dir, results.CaptureFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	r, err := pcapread.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := &shardCapture{dir: dir, f: f, r: r, global: map[int]int{}, rankOf: map[int]int{}}
	// Every interface is described before the first record.
	p, err := r.Next()
	switch {
	case errors.Is(err, io.EOF):
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	default:
		c.first = p
	}
	return c, nil
}

// next is the shard's next record that goes into the merged capture.
func (c *shardCapture) next(lv *runLevel) (record, bool, error) {
	for {
		p := c.first
		c.first = nil
		if p == nil {
			var err error
			if p, err = c.r.Next(); errors.Is(err, io.EOF) {
				return record{}, false, nil
			} else if err != nil {
				return record{}, false, fmt.Errorf("%s: %s: %w", c.dir, results.CaptureFile, err)
			}
		}
		if p.Annotation != nil {
			var ev eventlog.Event
			if err := json.Unmarshal(p.Annotation, &ev); err != nil {
				return record{}, false, fmt.Errorf("%s: %s: record %d: annotation: %w", c.dir, results.CaptureFile, p.Record, err)
			}
			if !lv.keep(&ev) {
				continue
			}
			return record{t: p.Time, rank: rank(&ev), iface: -1, data: slices.Clone(p.Annotation)}, true, nil
		}
		g, ok := c.global[p.Iface]
		if !ok {
			return record{}, false, fmt.Errorf("%s: %s: record %d on interface %d, described after the first record", c.dir, results.CaptureFile, p.Record, p.Iface)
		}
		rk, ok := c.rankOf[p.Iface]
		if !ok {
			rk = math.MaxInt
		}
		return record{t: p.Time, rank: rk, iface: g, data: slices.Clone(p.Data)}, true, nil
	}
}
