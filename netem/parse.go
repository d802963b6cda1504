package netem

import (
	"fmt"
	"math"
	"math/big"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"tokenbed/netem/dist"
)

// ParseError reports a word Parse could not accept.
type ParseError struct {
	Word   string // the offending word, or the keyword missing its argument
	Index  int    // 1-based position of Word among the words
	Offset int    // byte offset of Word in the input
	Msg    string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("netem: word %d %q (byte %d): %s", e.Index, e.Word, e.Offset, e.Msg)
}

type word struct {
	s   string
	off int
}

func splitWords(s string) []word {
	var ws []word
	i := 0
	for i < len(s) {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		ws = append(ws, word{s[i:j], i})
		i = j
	}
	return ws
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// matches is iproute2's matches(): the word is a non-empty prefix of the
// keyword, so "del", "dup" and "l" (limit) are accepted like in tc.
func matches(w, keyword string) bool { return w != "" && strings.HasPrefix(keyword, w) }

type parser struct {
	ws   []word
	i    int
	seen map[string]word
}

func (p *parser) errAt(i int, format string, a ...any) error {
	w := p.ws[i]
	return &ParseError{Word: w.s, Index: i + 1, Offset: w.off, Msg: fmt.Sprintf(format, a...)}
}

// next advances to the mandatory argument of the word at p.i.
func (p *parser) next(what string) (int, error) {
	if p.i+1 >= len(p.ws) {
		return 0, p.errAt(p.i, "missing %s", what)
	}
	p.i++
	return p.i, nil
}

// nextIsNumber is tc's NEXT_IS_NUMBER: the following word starts with a
// digit. Optional numeric arguments (jitter, correlations, model
// parameters) are recognised this way.
func (p *parser) nextIsNumber() bool {
	return p.i+1 < len(p.ws) && p.ws[p.i+1].s[0] >= '0' && p.ws[p.i+1].s[0] <= '9'
}

// nextIsSignedNumber is tc's NEXT_IS_SIGNED_NUMBER (digit or '-').
func (p *parser) nextIsSignedNumber() bool {
	return p.nextIsNumber() || (p.i+1 < len(p.ws) && p.ws[p.i+1].s[0] == '-')
}

func (p *parser) once(kind string) error {
	if prev, ok := p.seen[kind]; ok {
		return p.errAt(p.i, "%s given twice (first at byte %d)", kind, prev.off)
	}
	p.seen[kind] = p.ws[p.i]
	return nil
}

// Parse reads netem options in tc's syntax, i.e. what follows "netem" in
// `tc qdisc add dev DEV root netem ...`, for example
// "delay 40ms 5ms 25% distribution normal loss 1%". It accepts tc's
// keywords and abbreviations, units and defaults (see the package
// documentation for the few deliberate differences) and returns a validated
// Profile. Errors are *ParseError (naming the word and its position) or
// *FieldError. Custom distribution names are kept with a nil Table; fill
// them with LoadTables.
func Parse(s string) (Profile, error) {
	p := &parser{ws: splitWords(s), seen: map[string]word{}}
	var pr Profile
	for ; p.i < len(p.ws); p.i++ {
		w := p.ws[p.i].s
		var err error
		switch {
		case matches(w, "limit"):
			err = p.limit(&pr)
		case matches(w, "latency") || matches(w, "delay"):
			err = p.delay(&pr)
		case matches(w, "loss") || matches(w, "drop"):
			err = p.loss(&pr)
		case matches(w, "ecn"):
			if err = p.once("ecn"); err == nil {
				pr.ECN = true
			}
		case matches(w, "reorder"):
			err = p.probCorr("reorder", &pr.Reorder, &pr.ReorderCorrelation)
		case matches(w, "corrupt"):
			err = p.probCorr("corrupt", &pr.Corrupt, &pr.CorruptCorrelation)
		case matches(w, "gap"):
			err = p.gap(&pr)
		case matches(w, "duplicate"):
			err = p.probCorr("duplicate", &pr.Duplicate, &pr.DuplicateCorrelation)
		case matches(w, "distribution"):
			err = p.distribution(&pr.Distribution, "distribution")
		case matches(w, "rate"):
			err = p.rate(&pr)
		case matches(w, "slot"):
			err = p.slot(&pr)
		case w == "help":
			err = p.errAt(p.i, "help is not a netem option")
		default:
			err = p.errAt(p.i, "unknown keyword (want limit, delay, distribution, loss, ecn, duplicate, reorder, gap, corrupt, rate or slot)")
		}
		if err != nil {
			return Profile{}, err
		}
	}
	// tc's final checks, in tc's order.
	if pr.Reorder > 0 {
		if pr.Delay == 0 {
			return Profile{}, p.errKind("reorder", "reordering not possible without specifying some delay")
		}
		if pr.Gap == 0 {
			pr.Gap = 1
		}
	} else if pr.Gap > 0 {
		return Profile{}, p.errKind("gap", "gap specified without reorder probability")
	}
	if pr.ECN && !pr.Loss.Active() {
		return Profile{}, p.errKind("ecn", "ecn requested without loss model")
	}
	if !pr.Distribution.IsZero() && (pr.Delay == 0 || pr.Jitter == 0) {
		return Profile{}, p.errKind("distribution", "distribution specified but no latency and jitter values")
	}
	if err := pr.validate(false); err != nil {
		return Profile{}, err
	}
	return pr, nil
}

func (p *parser) errKind(kind, msg string) error {
	w := p.seen[kind]
	idx := 0
	for i := range p.ws {
		if p.ws[i] == w {
			idx = i
		}
	}
	return &ParseError{Word: w.s, Index: idx + 1, Offset: w.off, Msg: msg}
}

func (p *parser) limit(pr *Profile) error {
	if err := p.once("limit"); err != nil {
		return err
	}
	i, err := p.next("packet count after limit")
	if err != nil {
		return err
	}
	v, err := parseSize(p.ws[i].s, math.MaxUint32)
	if err != nil {
		return p.errAt(i, "limit: %v", err)
	}
	if v == 0 {
		return p.errAt(i, "limit 0 drops every packet; use loss 100%%")
	}
	pr.Limit = uint32(v)
	return nil
}

func (p *parser) delay(pr *Profile) error {
	if err := p.once("delay"); err != nil {
		return err
	}
	i, err := p.next("time after delay")
	if err != nil {
		return err
	}
	if pr.Delay, err = parseTime(p.ws[i].s, time.Microsecond); err != nil {
		return p.errAt(i, "delay: %v", err)
	}
	if !p.nextIsNumber() {
		return nil
	}
	p.i++
	if pr.Jitter, err = parseTime(p.ws[p.i].s, time.Microsecond); err != nil {
		return p.errAt(p.i, "delay jitter: %v", err)
	}
	if !p.nextIsNumber() {
		return nil
	}
	p.i++
	if pr.DelayCorrelation, err = parsePercent(p.ws[p.i].s); err != nil {
		return p.errAt(p.i, "delay correlation: %v", err)
	}
	return nil
}

func (p *parser) probCorr(kind string, prob, corr *Percent) error {
	if err := p.once(kind); err != nil {
		return err
	}
	i, err := p.next("percentage after " + kind)
	if err != nil {
		return err
	}
	if *prob, err = parsePercent(p.ws[i].s); err != nil {
		return p.errAt(i, "%s: %v", kind, err)
	}
	if p.nextIsNumber() {
		p.i++
		if *corr, err = parsePercent(p.ws[p.i].s); err != nil {
			return p.errAt(p.i, "%s correlation: %v", kind, err)
		}
	}
	return nil
}

func (p *parser) gap(pr *Profile) error {
	if err := p.once("gap"); err != nil {
		return err
	}
	i, err := p.next("distance after gap")
	if err != nil {
		return err
	}
	v, err := parseCInt(p.ws[i].s, 0, math.MaxUint32)
	if err != nil {
		return p.errAt(i, "gap: %v", err)
	}
	pr.Gap = uint32(v)
	return nil
}

func (p *parser) loss(pr *Profile) error {
	if err := p.once("loss"); err != nil {
		return err
	}
	i, err := p.next("loss model or percentage")
	if err != nil {
		return err
	}
	l := &pr.Loss
	w := p.ws[i].s
	switch {
	case w[0] >= '0' && w[0] <= '9': // old syntax "loss P [CORR]"
		p.i--
		fallthrough
	case w == "random":
		l.Model = LossRandom
		return p.probCorrNoOnce("loss random", &l.Percent, &l.Correlation)
	case w == "state":
		l.Model = LossState
		j, err := p.next("p13 after loss state")
		if err != nil {
			return err
		}
		if l.P13, err = parsePercent(p.ws[j].s); err != nil {
			return p.errAt(j, "loss state p13: %v", err)
		}
		l.P31, l.P32, l.P23, l.P14 = 100-l.P13, 0, 100, 0
		return p.optionalPercents("loss state", []string{"p31", "p32", "p23", "p14"}, &l.P31, &l.P32, &l.P23, &l.P14)
	case w == "gemodel":
		l.Model = LossGE
		j, err := p.next("p after loss gemodel")
		if err != nil {
			return err
		}
		if l.P, err = parsePercent(p.ws[j].s); err != nil {
			return p.errAt(j, "loss gemodel p: %v", err)
		}
		l.R, l.OneMinusH, l.OneMinusK = 100-l.P, 100, 0
		return p.optionalPercents("loss gemodel", []string{"r", "1-h", "1-k"}, &l.R, &l.OneMinusH, &l.OneMinusK)
	}
	return p.errAt(i, "unknown loss model (want random, state, gemodel or a percentage)")
}

func (p *parser) probCorrNoOnce(kind string, prob, corr *Percent) error {
	i, err := p.next("percentage after " + kind)
	if err != nil {
		return err
	}
	if *prob, err = parsePercent(p.ws[i].s); err != nil {
		return p.errAt(i, "%s: %v", kind, err)
	}
	if p.nextIsNumber() {
		p.i++
		if *corr, err = parsePercent(p.ws[p.i].s); err != nil {
			return p.errAt(p.i, "%s correlation: %v", kind, err)
		}
	}
	return nil
}

func (p *parser) optionalPercents(kind string, names []string, dst ...*Percent) error {
	for k, d := range dst {
		if !p.nextIsNumber() {
			return nil
		}
		p.i++
		v, err := parsePercent(p.ws[p.i].s)
		if err != nil {
			return p.errAt(p.i, "%s %s: %v", kind, names[k], err)
		}
		*d = v
	}
	return nil
}

func (p *parser) distribution(d *Distribution, kind string) error {
	if kind == "distribution" {
		if err := p.once(kind); err != nil {
			return err
		}
	}
	i, err := p.next("distribution name")
	if err != nil {
		return err
	}
	name := p.ws[i].s
	if name == "uniform" && kind == "distribution" {
		// tc has no uniform.dist; uniform is what netem does without a table.
		*d = Distribution{}
		return nil
	}
	if name == "uniform" || !validName(name) {
		return p.errAt(i, "%q is not a distribution table name", name)
	}
	*d = Distribution{Name: name}
	return nil
}

func (p *parser) rate(pr *Profile) error {
	if err := p.once("rate"); err != nil {
		return err
	}
	i, err := p.next("rate after rate")
	if err != nil {
		return err
	}
	r := &pr.Rate
	if r.BytesPerSecond, err = parseRate(p.ws[i].s); err != nil {
		return p.errAt(i, "rate: %v", err)
	}
	if p.nextIsSignedNumber() {
		p.i++
		v, err := parseCInt(p.ws[p.i].s, math.MinInt32, math.MaxInt32)
		if err != nil {
			return p.errAt(p.i, "rate packet overhead: %v", err)
		}
		r.PacketOverhead = int32(v)
	}
	if p.nextIsNumber() {
		p.i++
		v, err := parseCInt(p.ws[p.i].s, 0, math.MaxUint32)
		if err != nil {
			return p.errAt(p.i, "rate cell size: %v", err)
		}
		r.CellSize = uint32(v)
	}
	if p.nextIsSignedNumber() {
		p.i++
		v, err := parseCInt(p.ws[p.i].s, math.MinInt32, math.MaxInt32)
		if err != nil {
			return p.errAt(p.i, "rate cell overhead: %v", err)
		}
		r.CellOverhead = int32(v)
	}
	return nil
}

func (p *parser) slot(pr *Profile) error {
	if err := p.once("slot"); err != nil {
		return err
	}
	s := &pr.Slot
	var err error
	if p.nextIsNumber() {
		p.i++
		// tc reads slot times with get_time64: a bare number is nanoseconds.
		if s.Min, err = parseTime(p.ws[p.i].s, time.Nanosecond); err != nil {
			return p.errAt(p.i, "slot min delay: %v", err)
		}
		s.Max = s.Min
		if p.nextIsNumber() {
			p.i++
			if s.Max, err = parseTime(p.ws[p.i].s, time.Nanosecond); err != nil {
				return p.errAt(p.i, "slot max delay: %v", err)
			}
			if s.Max < s.Min {
				return p.errAt(p.i, "slot max delay below min delay")
			}
		}
	} else {
		i, err := p.next("min delay or \"distribution\" after slot")
		if err != nil {
			return err
		}
		if p.ws[i].s != "distribution" {
			return p.errAt(i, "unknown slot parameter (want a time or \"distribution\")")
		}
		if err := p.distribution(&s.Distribution, "slot distribution"); err != nil {
			return err
		}
		j, err := p.next("delay after slot distribution NAME")
		if err != nil {
			return err
		}
		if s.Delay, err = parseTime(p.ws[j].s, time.Nanosecond); err != nil {
			return p.errAt(j, "slot delay: %v", err)
		}
		j, err = p.next("jitter after slot distribution NAME DELAY")
		if err != nil {
			return err
		}
		if s.Jitter, err = parseTime(p.ws[j].s, time.Nanosecond); err != nil {
			return p.errAt(j, "slot jitter: %v", err)
		}
		if s.Jitter <= 0 {
			return p.errAt(j, "slot jitter must be positive")
		}
	}
	if p.i+1 < len(p.ws) && matches(p.ws[p.i+1].s, "packets") {
		p.i++
		j, err := p.next("count after slot packets")
		if err != nil {
			return err
		}
		v, err := parseCInt(p.ws[j].s, math.MinInt32, math.MaxInt32)
		if err != nil {
			return p.errAt(j, "slot packets: %v", err)
		}
		s.Packets = int32(v)
	}
	if p.i+1 < len(p.ws) && matches(p.ws[p.i+1].s, "bytes") {
		p.i++
		j, err := p.next("size after slot bytes")
		if err != nil {
			return err
		}
		v, err := parseSize(p.ws[j].s, math.MaxInt32)
		if err != nil {
			return p.errAt(j, "slot bytes: %v", err)
		}
		s.Bytes = int32(v)
	}
	return nil
}

// parseNumber reads the longest decimal prefix strtod would read (sign,
// digits, fraction, exponent) exactly, and returns it with the rest of the
// word (the unit). Hex floats, inf and nan are refused.
func parseNumber(s string) (*big.Rat, string, error) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return nil, "", fmt.Errorf("%q is not a number", s)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j && k-j <= 4 {
			i = k
		}
	}
	r, ok := new(big.Rat).SetString(s[:i])
	if !ok {
		return nil, "", fmt.Errorf("%q is not a number", s)
	}
	return r, s[i:], nil
}

var timeUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second,
	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond,
	"us": time.Microsecond, "usec": time.Microsecond, "usecs": time.Microsecond,
	"ns": time.Nanosecond, "nsec": time.Nanosecond, "nsecs": time.Nanosecond,
}

// parseTime reads tc's TIME: a number with an optional unit (s, ms, us,
// ns and their sec/msec/usec/nsec spellings, any case). A bare number is
// in bare units (microseconds for delay, nanoseconds for slot, as tc 6.1).
// Fractions of a nanosecond are truncated, as tc truncates.
func parseTime(s string, bare time.Duration) (time.Duration, error) {
	r, unit, err := parseNumber(s)
	if err != nil {
		return 0, err
	}
	scale := bare
	if unit != "" {
		u, ok := timeUnits[strings.ToLower(unit)]
		if !ok {
			return 0, fmt.Errorf("unknown time unit %q (want s, ms, us or ns)", unit)
		}
		scale = u
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("negative time %q", s)
	}
	v := new(big.Rat).Mul(r, new(big.Rat).SetInt64(int64(scale)))
	n := new(big.Int).Quo(v.Num(), v.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("time %q is too large", s)
	}
	return time.Duration(n.Int64()), nil
}

// parsePercent reads tc's PERCENT: a number, optionally followed by "%",
// in 0..100 (tc's parse_percent: "1" and "1%" both mean one percent).
func parsePercent(s string) (Percent, error) {
	r, unit, err := parseNumber(s)
	if err != nil {
		return 0, err
	}
	if unit != "" && unit != "%" {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	if r.Sign() < 0 || r.Cmp(big.NewRat(100, 1)) > 0 {
		return 0, fmt.Errorf("%s is outside 0%%..100%%", s)
	}
	f, _ := r.Float64()
	return Percent(f), nil
}

// rateUnits is iproute2's suffix table for get_rate64 (matched ignoring
// case, so "kbps" is kilobytes per second, not kilobits). The scale is in
// bits per second.
var rateUnits = []struct {
	name  string
	scale float64
}{
	{"bit", 1}, {"kibit", 1024}, {"kbit", 1000}, {"mibit", 1 << 20}, {"mbit", 1e6},
	{"gibit", 1 << 30}, {"gbit", 1e9}, {"tibit", 1 << 40}, {"tbit", 1e12},
	{"bps", 8}, {"kibps", 8 * 1024}, {"kbps", 8000}, {"mibps", 8 << 20}, {"mbps", 8e6},
	{"gibps", 8 << 30}, {"gbps", 8e9}, {"tibps", 8 << 40}, {"tbps", 8e12},
}

// parseRate reads tc's RATE and returns bytes per second, truncated as tc
// truncates. A bare number is bits per second.
func parseRate(s string) (uint64, error) {
	if strings.Contains(s, "%") {
		return 0, fmt.Errorf("%q: a rate in percent of the device speed needs the device; give an absolute rate", s)
	}
	r, unit, err := parseNumber(s)
	if err != nil {
		return 0, err
	}
	scale := 1.0
	if unit != "" {
		found := false
		for _, u := range rateUnits {
			if strings.EqualFold(unit, u.name) {
				scale, found = u.scale, true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown rate unit %q (want bit, kbit, mbit, gbit, tbit, bps, kbps, ... or their IEC forms kibit, mibps, ...)", unit)
		}
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("negative rate %q", s)
	}
	v := new(big.Rat).Mul(r, new(big.Rat).SetFloat64(scale))
	v.Quo(v, big.NewRat(8, 1))
	n := new(big.Int).Quo(v.Num(), v.Denom())
	if !n.IsUint64() {
		return 0, fmt.Errorf("rate %q is too large", s)
	}
	return n.Uint64(), nil
}

// sizeUnits is iproute2's get_size: binary multiples of bytes or bits.
var sizeUnits = map[string]int64{
	"b": 1, "k": 1024, "kb": 1024, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
	"kbit": 1024 / 8, "mbit": (1 << 20) / 8, "gbit": (1 << 30) / 8,
}

func parseSize(s string, max uint64) (uint64, error) {
	r, unit, err := parseNumber(s)
	if err != nil {
		return 0, err
	}
	scale := int64(1)
	if unit != "" {
		u, ok := sizeUnits[strings.ToLower(unit)]
		if !ok {
			return 0, fmt.Errorf("unknown size unit %q (want b, k, kb, m, mb, g, gb, kbit, mbit or gbit)", unit)
		}
		scale = u
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("negative size %q", s)
	}
	v := new(big.Rat).Mul(r, new(big.Rat).SetInt64(scale))
	n := new(big.Int).Quo(v.Num(), v.Denom())
	if !n.IsUint64() || n.Uint64() > max {
		return 0, fmt.Errorf("%q exceeds %d", s, max)
	}
	return n.Uint64(), nil
}

// parseCInt reads an integer as strtol/strtoul with base 0 do (decimal,
// 0x hex, leading-0 octal) and checks its range.
func parseCInt(s string, min, max int64) (int64, error) {
	body, neg := s, false
	if strings.HasPrefix(body, "-") {
		body, neg = body[1:], true
	} else if strings.HasPrefix(body, "+") {
		body = body[1:]
	}
	base := 10
	switch {
	case len(body) > 2 && (body[:2] == "0x" || body[:2] == "0X"):
		body, base = body[2:], 16
	case len(body) > 1 && body[0] == '0':
		body, base = body[1:], 8
	}
	if body == "" || body[0] == '+' || body[0] == '-' {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	u, err := strconv.ParseUint(body, base, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	if u > math.MaxInt64 {
		return 0, fmt.Errorf("%q is out of range %d..%d", s, min, max)
	}
	v := int64(u)
	if neg {
		v = -v
	}
	if v < min || v > max {
		return 0, fmt.Errorf("%q is out of range %d..%d", s, min, max)
	}
	return v, nil
}

// LoadTables fills the Table of every custom (non built-in) distribution of
// p from DIR/NAME.dist, the way tc reads them from its library directory
// (TC_LIB_DIR, or /usr/lib/tc). Built-in names never touch the file system.
func (p *Profile) LoadTables(dir string) error {
	for _, d := range []*Distribution{&p.Distribution, &p.Slot.Distribution} {
		if d.IsZero() || dist.IsBuiltin(d.Name) || len(d.Table) > 0 {
			continue
		}
		t, err := dist.Load(filepath.Join(dir, d.Name+".dist"))
		if err != nil {
			return err
		}
		d.Table = t
	}
	return nil
}
