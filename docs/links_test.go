package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, one level above this package.
const root = ".."

// pages lists README.md and every docs/**/*.md, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// line is one line of prose of a page (fenced code blocks left out).
type line struct {
	n    int
	text string
}

// prose reads a page's lines outside fenced code blocks.
func prose(path string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []line
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; s.Scan(); n++ {
		t := s.Text()
		if strings.HasPrefix(strings.TrimSpace(t), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line{n, t})
		}
	}
	return out, s.Err()
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE    = regexp.MustCompile("`[^`]*`")
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	runIDRE   = regexp.MustCompile(`\btb[0-9a-f]{6}\b`)
)

// anchor is GitHub's anchor of a heading: lower case, markup and
// punctuation dropped, spaces turned into hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the anchors of a page's headings, numbering repeats as
// GitHub does (x, x-1, x-2).
func anchors(path string) (map[string]bool, error) {
	lines, err := prose(path)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines {
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		a := anchor(m[1])
		if k := seen[a]; k > 0 {
			out[fmt.Sprintf("%s-%d", a, k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out, nil
}

// brokenLinks returns one message per relative link of the pages (paths
// relative to dir) that names a missing file or a missing heading.
func brokenLinks(dir string, files []string) ([]string, error) {
	var bad []string
	cache := map[string]map[string]bool{}
	for _, page := range files {
		lines, err := prose(filepath.Join(dir, page))
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(l.text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				full := filepath.Join(dir, page)
				if file != "" {
					full = filepath.Join(dir, filepath.Dir(page), file)
				}
				st, err := os.Stat(full)
				if err != nil {
					bad = append(bad, fmt.Sprintf("%s:%d: link %q: no file %s", page, l.n, target, full))
					continue
				}
				if frag == "" {
					continue
				}
				if st.IsDir() || !strings.HasSuffix(full, ".md") {
					bad = append(bad, fmt.Sprintf("%s:%d: link %q: a heading anchor on a file that is not markdown", page, l.n, target))
					continue
				}
				as, ok := cache[full]
				if !ok {
					if as, err = anchors(full); err != nil {
						return nil, err
					}
					cache[full] = as
				}
				if !as[frag] {
					bad = append(bad, fmt.Sprintf("%s:%d: link %q: no heading #%s in %s", page, l.n, target, frag, full))
				}
			}
		}
	}
	return bad, nil
}

// TestLinks fails on a relative link of README.md or docs/**/*.md to a
// missing file or a missing heading anchor.
func TestLinks(t *testing.T) {
	bad, err := brokenLinks(root, pages(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// TestBrokenLinksAreFound runs the checker on a literal page with one good
// and two broken links, so that a checker that finds nothing fails here.
func TestBrokenLinksAreFound(t *testing.T) {
	dir := t.TempDir()
	page := "# Top\n\n## A heading, with `code`\n\n[ok](#a-heading-with-code) [ok](b.md#b)\n" +
		"[gone](missing.md) [no anchor](b.md#nowhere)\n```\n[in code](ignored.md)\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.md"), []byte("# B\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := brokenLinks(dir, []string{"a.md"})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 2 || !strings.Contains(bad[0], "missing.md") || !strings.Contains(bad[1], "#nowhere") {
		t.Fatalf("broken links found: %q, want missing.md and b.md#nowhere", bad)
	}
}

// TestRunIDsOnlyInStudies keeps run IDs (tb and 6 hex digits) out of the
// README and the reference and topic pages: a measurement belongs in a
// study page beside the command that reproduces it.
func TestRunIDsOnlyInStudies(t *testing.T) {
	for _, page := range pages(t) {
		if strings.HasPrefix(filepath.ToSlash(page), "docs/studies/") {
			continue
		}
		lines, err := prose(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if id := runIDRE.FindString(l.text); id != "" {
				t.Errorf("%s:%d: run ID %s outside docs/studies", page, l.n, id)
			}
		}
	}
}

// TestREADMEIsShort keeps the README an overview: at most 250 lines.
func TestREADMEIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, at most 250", n)
	}
}
