package netem

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseTCExamples(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		in   string
		want Profile
	}{
		{"", Profile{}},
		{"delay 40ms 5ms 25% distribution normal loss 1%", Profile{Delay: 40 * ms, Jitter: 5 * ms, DelayCorrelation: 25,
			Distribution: Distribution{Name: "normal"}, Loss: Loss{Percent: 1}}},
		{"delay 100ms", Profile{Delay: 100 * ms}},
		{"latency 1.5ms 250us", Profile{Delay: 1500 * time.Microsecond, Jitter: 250 * time.Microsecond}},
		{"delay 2500", Profile{Delay: 2500 * time.Microsecond}}, // bare delay is µs (tc 6.1 get_time)
		{"delay 1s 10MSEC", Profile{Delay: time.Second, Jitter: 10 * ms}},
		{"loss 0.3% 25%", Profile{Loss: Loss{Percent: 0.3, Correlation: 25}}},
		{"drop random 5", Profile{Loss: Loss{Percent: 5}}},
		{"loss state 1%", Profile{Loss: Loss{Model: LossState, P13: 1, P31: 99, P32: 0, P23: 100, P14: 0}}},
		{"loss state 1% 30% 10% 80% 0.5%", Profile{Loss: Loss{Model: LossState, P13: 1, P31: 30, P32: 10, P23: 80, P14: 0.5}}},
		{"loss gemodel 1%", Profile{Loss: Loss{Model: LossGE, P: 1, R: 99, OneMinusH: 100, OneMinusK: 0}}},
		{"loss gemodel 1% 10% 70% 0.1% ecn", Profile{Loss: Loss{Model: LossGE, P: 1, R: 10, OneMinusH: 70, OneMinusK: 0.1}, ECN: true}},
		{"duplicate 1% 50%", Profile{Duplicate: 1, DuplicateCorrelation: 50}},
		{"delay 10ms reorder 25% 50% gap 5", Profile{Delay: 10 * ms, Reorder: 25, ReorderCorrelation: 50, Gap: 5}},
		{"delay 10ms reorder 25%", Profile{Delay: 10 * ms, Reorder: 25, Gap: 1}},
		{"corrupt 0.1%", Profile{Corrupt: 0.1}},
		{"rate 5kbit 20 100 5", Profile{Rate: Rate{BytesPerSecond: 625, PacketOverhead: 20, CellSize: 100, CellOverhead: 5}}},
		{"rate 1mbit -14", Profile{Rate: Rate{BytesPerSecond: 125000, PacketOverhead: -14}}},
		{"rate 100kbps", Profile{Rate: Rate{BytesPerSecond: 100000}}}, // tc: kbps is kilobytes/s
		{"rate 1Mibit", Profile{Rate: Rate{BytesPerSecond: 131072}}},
		{"rate 10gbit", Profile{Rate: Rate{BytesPerSecond: 1250000000}}},
		{"rate 50gbit", Profile{Rate: Rate{BytesPerSecond: 6250000000}}}, // needs RATE64
		{"limit 10000", Profile{Limit: 10000}},
		{"limit 2k", Profile{Limit: 2048}},
		{"slot 800us", Profile{Slot: Slot{Min: 800 * time.Microsecond, Max: 800 * time.Microsecond}}},
		{"slot 1ms 2ms packets 4 bytes 1500", Profile{Slot: Slot{Min: ms, Max: 2 * ms, Packets: 4, Bytes: 1500}}},
		{"slot 1000 2000", Profile{Slot: Slot{Min: 1000, Max: 2000}}}, // bare slot time is ns (get_time64)
		{"slot distribution pareto 2ms 1ms bytes 2k", Profile{Slot: Slot{Distribution: Distribution{Name: "pareto"}, Delay: 2 * ms, Jitter: ms, Bytes: 2048}}},
		{"d 10ms 1ms di paretonormal l 50 du 1 c 2", Profile{Delay: 10 * ms, Jitter: ms, Distribution: Distribution{Name: "paretonormal"},
			Limit: 50, Duplicate: 1, Corrupt: 2}}, // tc's prefix matching
		{"delay 10ms 2ms distribution uniform", Profile{Delay: 10 * ms, Jitter: 2 * ms}},
		{"delay 10ms 2ms distribution mytable", Profile{Delay: 10 * ms, Jitter: 2 * ms, Distribution: Distribution{Name: "mytable"}}},
		{"\tdelay  10ms\n", Profile{Delay: 10 * ms}},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("Parse(%q) =\n %#v\nwant\n %#v", c.in, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		in    string
		word  string
		index int
		msg   string
	}{
		{"delay 10xs", "10xs", 2, "unknown time unit"},
		{"delay", "delay", 1, "missing time"},
		{"loss 1% bogus", "bogus", 3, "unknown keyword"},
		{"loss 101%", "101%", 2, "outside 0%..100%"},
		{"loss -1%", "-1%", 2, "unknown loss model"}, // tc: not a digit, so not a percentage
		{"loss sometimes", "sometimes", 2, "unknown loss model"},
		{"loss 1% loss 2%", "loss", 3, "given twice"},
		{"delay 1ms delay 2ms", "delay", 3, "given twice"},
		{"reorder 10%", "reorder", 1, "without specifying some delay"},
		{"delay 10ms gap 5", "gap", 3, "gap specified without reorder"},
		{"ecn", "ecn", 1, "ecn requested without loss model"},
		{"delay 10ms distribution normal", "distribution", 3, "no latency and jitter"},
		{"rate 10%", "10%", 2, "needs the device"},
		{"rate 1furlong", "1furlong", 2, "unknown rate unit"},
		{"limit 0", "0", 2, "drops every packet"},
		{"limit 5zb", "5zb", 2, "unknown size unit"},
		{"slot 2ms 1ms", "1ms", 3, "below min"},
		{"slot fast", "fast", 2, "unknown slot parameter"},
		{"slot distribution normal 1ms 0", "0", 5, "positive"},
		{"gap x", "x", 2, "not an integer"},
		{"help", "help", 1, "not a netem option"},
		{"delay 1ms 1ms 25%x", "25%x", 4, "not a percentage"},
		{"loss state 60% 50% 60%", "", 0, "Loss.P32"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", c.in)
			continue
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("Parse(%q) = %v, want it to mention %q", c.in, err, c.msg)
		}
		if c.word == "" {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Parse(%q) = %T, want *FieldError", c.in, err)
			}
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %T %v, want *ParseError", c.in, err, err)
			continue
		}
		if pe.Word != c.word || pe.Index != c.index || c.in[pe.Offset:pe.Offset+len(pe.Word)] != pe.Word {
			t.Errorf("Parse(%q) error at word %d %q offset %d, want word %d %q", c.in, pe.Index, pe.Word, pe.Offset, c.index, c.word)
		}
	}
}

func TestValidateNamesField(t *testing.T) {
	cases := []struct {
		p     Profile
		field string
	}{
		{Profile{Loss: Loss{Percent: 150}}, "Loss.Percent"},
		{Profile{Jitter: 3 * time.Second}, "Jitter"},
		{Profile{Delay: -1}, "Delay"},
		{Profile{DelayCorrelation: 10}, "DelayCorrelation"},
		{Profile{Delay: time.Millisecond, Reorder: 10}, "Gap"},
		{Profile{Gap: 3}, "Gap"},
		{Profile{Loss: Loss{Model: LossGE, P13: 1}}, "Loss.P13"},
		{Profile{Loss: Loss{Model: LossState, P13: 60, P14: 50}}, "Loss.P14"},
		{Profile{Rate: Rate{CellOverhead: 5, BytesPerSecond: 1}}, "Rate.CellOverhead"},
		{Profile{Rate: Rate{PacketOverhead: 5}}, "Rate.PacketOverhead"},
		{Profile{Slot: Slot{Min: 2, Max: 1}}, "Slot.Max"},
		{Profile{Slot: Slot{Packets: 5}}, "Slot.Packets"},
		{Profile{Delay: 1, Jitter: 1, Distribution: Distribution{Name: "mine"}}, "Distribution.Table"},
		{Profile{Delay: 1, Jitter: 1, Distribution: Distribution{Name: "normal", Table: []int16{1}}}, "Distribution.Table"},
		{Profile{Delay: 1, Jitter: 1, Distribution: Distribution{Name: "uniform"}}, "Distribution.Name"},
		{Profile{Jitter: 1, Distribution: Distribution{Name: "normal"}}, "Distribution"},
		{Profile{ECN: true}, "ECN"},
		{Profile{Loss: Loss{Model: 7}}, "Loss.Model"},
	}
	for _, c := range cases {
		err := c.p.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Validate(%+v) = %v, want a FieldError for %s", c.p, err, c.field)
		}
	}
	ok := Profile{Delay: time.Millisecond, Jitter: time.Millisecond, Distribution: Distribution{Name: "mine", Table: []int16{-1, 0, 1}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestStringCanonical(t *testing.T) {
	cases := map[string]string{
		"delay 40ms 5ms 25% distribution normal loss 1%": "delay 40ms 5ms 25% distribution normal loss random 1%",
		"loss state 1%":                 "loss state 1% 99% 0% 100% 0%",
		"loss gemodel 2 3":              "loss gemodel 2% 3% 100% 0%",
		"delay 0.5s reorder 10":         "delay 500ms reorder 10% gap 1",
		"rate 1.5mbit 0 48 5":           "rate 1500kbit 0 48 5",
		"rate 8bit":                     "rate 8bit",
		"slot 1000":                     "slot 1us 1us",
		"delay 1.234567ms":              "delay 1234.567us",
		"slot 3 4 packets 2":            "slot 3ns 4ns packets 2",
		"limit 1000 delay 0ms 1ms":      "limit 1000 delay 0ms 1ms",
		"slot distribution normal 1 2s": "slot distribution normal 1ns 2s",
	}
	for in, want := range cases {
		p, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if got := p.String(); got != want {
			t.Errorf("Parse(%q).String() = %q, want %q", in, got, want)
		}
	}
}

// randomProfile draws a valid Profile; every field kind is exercised.
func randomProfile(r *rand.Rand) Profile {
	pct := func() Percent {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return Percent(r.IntN(101))
		case 2:
			return Percent(r.Float64() * 100)
		}
		return Percent(float64(r.IntN(100000)) / 1000)
	}
	dur := func(max time.Duration) time.Duration {
		switch r.IntN(3) {
		case 0:
			return time.Duration(r.Int64N(int64(max)))
		case 1:
			return time.Duration(r.Int64N(int64(max/time.Millisecond))) * time.Millisecond
		}
		return time.Duration(r.Int64N(int64(max/time.Microsecond))) * time.Microsecond
	}
	var p Profile
	if r.IntN(3) == 0 {
		p.Limit = uint32(r.IntN(100000) + 1)
	}
	if r.IntN(2) == 0 {
		p.Delay = dur(10 * time.Second)
		if r.IntN(2) == 0 {
			p.Jitter = dur(MaxJitter) + 1
			p.DelayCorrelation = pct()
			if p.Delay > 0 && r.IntN(2) == 0 {
				p.Distribution.Name = []string{"normal", "pareto", "paretonormal", "experimental"}[r.IntN(4)]
			}
		}
	}
	switch r.IntN(4) {
	case 0:
		p.Loss.Percent = pct()
		if p.Loss.Percent > 0 {
			p.Loss.Correlation = pct()
		}
	case 1:
		p.Loss = Loss{Model: LossState, P13: pct() / 2, P14: pct() / 2, P31: pct() / 2, P32: pct() / 2, P23: pct()}
	case 2:
		p.Loss = Loss{Model: LossGE, P: pct(), R: pct(), OneMinusH: pct(), OneMinusK: pct()}
	}
	p.ECN = p.Loss.Active() && r.IntN(2) == 0
	if p.Duplicate = pct(); p.Duplicate > 0 {
		p.DuplicateCorrelation = pct()
	}
	if p.Delay > 0 {
		if p.Reorder = pct(); p.Reorder > 0 {
			p.ReorderCorrelation = pct()
			p.Gap = uint32(r.IntN(10) + 1)
		}
	}
	if p.Corrupt = pct(); p.Corrupt > 0 {
		p.CorruptCorrelation = pct()
	}
	if r.IntN(2) == 0 {
		p.Rate.BytesPerSecond = r.Uint64N(1<<40) + 1
		p.Rate.PacketOverhead = int32(r.IntN(200) - 100)
		if r.IntN(2) == 0 {
			p.Rate.CellSize = uint32(r.IntN(100))
			if p.Rate.CellSize > 0 {
				p.Rate.CellOverhead = int32(r.IntN(20) - 10)
			}
		}
	}
	switch r.IntN(3) {
	case 0:
		p.Slot.Min = dur(time.Second) + 1
		p.Slot.Max = p.Slot.Min + dur(time.Second)
	case 1:
		p.Slot.Distribution.Name = "pareto"
		p.Slot.Delay = dur(time.Second)
		p.Slot.Jitter = dur(time.Second) + 1
	}
	if p.Slot.Active() {
		p.Slot.Packets = int32(r.IntN(10))
		p.Slot.Bytes = int32(r.IntN(100000))
	}
	return p
}

// TestRoundTripProperty: for valid Profiles, Parse(String(p)) == p, and
// String is a fixed point of String∘Parse.
func TestRoundTripProperty(t *testing.T) {
	const seed = 0x6e6574656d // recorded: rerun with the same seed to reproduce
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < 20000; i++ {
		p := randomProfile(r)
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %#x case %d: generator made an invalid profile %+v: %v", seed, i, p, err)
		}
		s := p.String()
		q, err := Parse(s)
		if err != nil {
			t.Fatalf("seed %#x case %d: Parse(%q): %v", seed, i, s, err)
		}
		if !q.Equal(p) {
			t.Fatalf("seed %#x case %d: round trip of %q\n got %+v\nwant %+v", seed, i, s, q, p)
		}
		if s2 := q.String(); s2 != s {
			t.Fatalf("seed %#x case %d: String not a fixed point: %q then %q", seed, i, s, s2)
		}
	}
}
