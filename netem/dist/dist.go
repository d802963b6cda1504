// Package dist holds netem's delay distribution tables: the four tables
// iproute2 ships (normal, pareto, paretonormal, experimental), generated here
// exactly as iproute2's netem/normal.c, pareto.c and paretonormal.c generate
// them, plus a loader for custom .dist files and a port of maketable.c that
// turns measured samples into a table.
//
// A table is an inverse cumulative distribution function sampled at
// len(table) evenly spaced probabilities, scaled by Scale: an entry t stands
// for mu + sigma*t/Scale. The kernel (sch_netem tabledist) picks an entry with
// a uniform random index; netem does the same in userspace. Tables never
// depend on files at run time: the generated ones are computed once, the
// experimental one is embedded.
package dist

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
)

const (
	// Scale is NETEM_DIST_SCALE (include/uapi/linux/pkt_sched.h): a table
	// entry of Scale means one sigma.
	Scale = 8192
	// MaxEntries is NETEM_DIST_MAX: the kernel rejects larger tables.
	MaxEntries = 16384
	// tableSize is the TABLESIZE of iproute2's generators; they print every
	// fourth entry, so the shipped tables hold tableSize/4 = 4096 values.
	tableSize = 16384
)

// Names of the built-in tables, as tc's "distribution NAME" spells them.
const (
	Normal       = "normal"
	Pareto       = "pareto"
	ParetoNormal = "paretonormal"
	Experimental = "experimental"
)

// Builtins lists the built-in table names in a stable order.
var Builtins = []string{Normal, Pareto, ParetoNormal, Experimental}

//go:embed experimental.dist
var experimentalDist string

var (
	once    sync.Once
	tables  map[string][]int16
	initErr error
)

func build() {
	tables = map[string][]int16{
		Normal:       genNormal(),
		Pareto:       genPareto(),
		ParetoNormal: genParetoNormal(),
	}
	// experimental.dist comes from maketable run over experimental.dat, a
	// data file iproute2 keeps out of its release tarball; embed the result.
	t, err := Parse(strings.NewReader(experimentalDist), "experimental.dist")
	if err != nil {
		initErr = err
		return
	}
	tables[Experimental] = t
}

// Builtin returns a copy of the named built-in table and whether the name is
// one of Builtins.
func Builtin(name string) ([]int16, bool) {
	once.Do(build)
	if initErr != nil {
		panic("dist: embedded experimental table is corrupt: " + initErr.Error())
	}
	t, ok := tables[name]
	if !ok {
		return nil, false
	}
	return append([]int16(nil), t...), true
}

// IsBuiltin reports whether name is one of Builtins.
func IsBuiltin(name string) bool {
	for _, b := range Builtins {
		if b == name {
			return true
		}
	}
	return false
}

// Header returns the comment line iproute2's generators print first.
func Header(name string) string {
	return "# This is the distribution table for the " + name + " distribution."
}

// Format writes t in the layout of iproute2's shipped .dist files: a header
// comment, then eight values a line. normal, pareto and paretonormal put a
// space before every value (" %d"); maketable (experimental and any table
// made from samples) separates values by one space and ends each line after
// the eighth ("%d%c"). leadingSpace selects the former.
func Format(w io.Writer, name string, t []int16, leadingSpace bool) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, Header(name))
	for i, v := range t {
		if leadingSpace {
			fmt.Fprintf(bw, " %d", v)
			if i%8 == 7 {
				bw.WriteByte('\n')
			}
		} else {
			sep := byte(' ')
			if i%8 == 7 {
				sep = '\n'
			}
			fmt.Fprintf(bw, "%d%c", v, sep)
		}
	}
	return bw.Flush()
}

// genNormal ports iproute2 netem/normal.c: invert the standard normal CDF by
// walking x over [-10, 10.05) in steps of 5e-5 (the same float64
// accumulation as the C loop), keep every fourth of the 16384 quantiles.
func genNormal() []int16 {
	q := normalQuantiles()
	out := make([]int16, 0, tableSize/4)
	for i := 0; i < tableSize; i += 4 {
		out = append(out, clamp16(int(math.RoundToEven(q[i]*Scale))))
	}
	return out
}

func normalQuantiles() *[tableSize + 1]float64 {
	var table [tableSize + 1]float64
	for x := -10.0; x < 10.05; x += .00005 {
		i := int(math.RoundToEven(tableSize * normalCDF(x)))
		table[i] = x
	}
	return &table
}

func normalCDF(x float64) float64 {
	return .5 + .5*math.Erf(x/math.Sqrt(2.0))
}

// paretoValue ports pareto.c's body for i in (0, 65536]: the Pareto (a=3)
// inverse CDF, shifted by its mean 1.5 and scaled to unit-ish spread.
func paretoValue(i int) int {
	d := float64(i) / 65536
	d = 1.0 / math.Pow(d, 1.0/3.0)
	d -= 1.5
	d *= (4.0 / 3.0) * Scale
	if d > 32767 {
		d = 32767
	}
	return int(math.RoundToEven(d))
}

// genPareto ports iproute2 netem/pareto.c.
func genPareto() []int16 {
	out := make([]int16, 0, tableSize/4)
	for i := 65536; i > 0; i -= 16 {
		out = append(out, int16(paretoValue(i)))
	}
	return out
}

// genParetoNormal ports iproute2 netem/paretonormal.c: .25*normal + .75*pareto,
// with C's truncating integer division.
func genParetoNormal() []int16 {
	q := normalQuantiles()
	out := make([]int16, 0, tableSize/4)
	for i := 0; i < tableSize; i += 4 {
		norm := int(math.RoundToEven(q[i] * Scale))
		par := paretoValue(65536 - 4*i)
		out = append(out, clamp16((norm+3*par)/4))
	}
	return out
}

func clamp16(v int) int16 {
	if v < math.MinInt16 {
		return math.MinInt16
	}
	if v > math.MaxInt16 {
		return math.MaxInt16
	}
	return int16(v)
}

// Load reads a .dist file in iproute2's format (see Parse).
func Load(path string) ([]int16, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dist: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// LineError reports a bad .dist file line.
type LineError struct {
	File string // file name as given to Parse or Load
	Line int    // 1-based
	Msg  string
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Parse reads a table in iproute2's .dist format: lines starting with '#'
// and blank lines are skipped; every other line holds whitespace-separated
// integers (decimal, 0x hex or 0 octal, as strtol base 0 reads them).
// iproute2's reader stops at the first non-number of a line and silently
// truncates values to 16 bits; Parse instead rejects both, and tables longer
// than MaxEntries, with the file and line. name is used in errors.
func Parse(r io.Reader, name string) ([]int16, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var t []int16
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		for _, f := range strings.Fields(s) {
			v, err := strconv.ParseInt(cBase0(f))
			if err != nil {
				return nil, &LineError{name, line, fmt.Sprintf("%q is not an integer", f)}
			}
			if v < math.MinInt16 || v > math.MaxInt16 {
				return nil, &LineError{name, line, fmt.Sprintf("%d does not fit in 16 bits", v)}
			}
			if len(t) == MaxEntries {
				return nil, &LineError{name, line, fmt.Sprintf("more than %d values (NETEM_DIST_MAX)", MaxEntries)}
			}
			t = append(t, int16(v))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &LineError{name, line + 1, err.Error()}
	}
	if len(t) == 0 {
		return nil, &LineError{name, line, "no values"}
	}
	return t, nil
}

// cBase0 maps strtol's base-0 spellings to ParseInt arguments: "0x" hex,
// leading "0" octal, else decimal; Go's extra prefixes (0b, 0o, _) are
// refused by passing an explicit base.
func cBase0(s string) (string, int, int) {
	neg := ""
	body := s
	if strings.HasPrefix(body, "-") || strings.HasPrefix(body, "+") {
		neg, body = body[:1], body[1:]
	}
	switch {
	case len(body) > 2 && (body[:2] == "0x" || body[:2] == "0X"):
		return neg + body[2:], 16, 64
	case len(body) > 1 && body[0] == '0':
		return neg + body[1:], 8, 64
	}
	return s, 10, 64
}
