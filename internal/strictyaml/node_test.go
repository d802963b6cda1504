package strictyaml

import (
	"strings"
	"testing"
	"time"
)

// A Node field is kept undecoded with its path; Merge overrides the base
// key by key (recursively) and keeps each value's line; Split takes keys
// out; Decode is as strict as a whole file.
func TestNodeMergeSplitDecode(t *testing.T) {
	var doc struct {
		Defaults Node `yaml:"defaults"`
		Items    []struct {
			Name string `yaml:"name"`
			Conf Node   `yaml:"conf"`
		} `yaml:"items"`
	}
	f, err := Decode("x.yaml", []byte(`defaults:
  a: {x: 1s, y: 2s}
  b: 3
items:
  - name: one
    conf:
      a: {y: 5s}
      c: {z: 1}
  - name: two
`), &doc)
	if err != nil {
		t.Fatal(err)
	}
	one, two := doc.Items[0].Conf, doc.Items[1].Conf
	if one.Path() != "$.items[0].conf" || !two.IsZero() || two.Path() != "$.items[1].conf" {
		t.Fatalf("paths %q %q (zero %v)", one.Path(), two.Path(), two.IsZero())
	}
	m := Merge(doc.Defaults, one)
	rest, taken := m.Split(func(k string) bool { return k == "c" })
	var got struct {
		A struct{ X, Y time.Duration } `yaml:"a"`
		B int                          `yaml:"b"`
	}
	if err := rest.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.A.X != time.Second || got.A.Y != 5*time.Second || got.B != 3 {
		t.Errorf("merged %+v: want x from the defaults, y overridden, b inherited", got)
	}
	if c, ok := taken["c"]; !ok || c.Path() != "$.items[0].conf.c" {
		t.Errorf("taken %v", taken)
	}
	// Errors name the line of the value, wherever it came from.
	m.Errorf("a.y", "too long")
	m.Errorf("a.x", "too short")
	err = f.Err()
	for _, want := range []string{"x.yaml:7:14: items[0].conf.a.y: too long", "x.yaml:2:10: items[0].conf.a.x: too short"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// Strict: an unknown field of a node is an error at its line. (One
	// unknown field: with several, goccy/go-yaml names one of them picked
	// by map order.)
	var strict struct {
		Z int `yaml:"z"`
		B int `yaml:"b"`
	}
	if err := taken["c"].Decode(&strict); err != nil || strict.Z != 1 {
		t.Errorf("decode c: %v %+v", err, strict)
	}
	if err := rest.Decode(&strict); err == nil || !strings.Contains(err.Error(), `x.yaml:7:7: unknown field "a"`) {
		t.Errorf("unknown field: %v", err)
	}
}
