package eventlog

import "strconv"

// decodeFast decodes a line in the form AppendJSON writes: one flat
// object, no spaces, typed fields only, integers, and strings of plain
// ASCII without escapes, of a kind this package lists. Anything else
// (escapes, non-ASCII, counts, time_scale, another protocol's fields, an
// unknown field, a malformed line) is not its business: ok false, and
// decode takes the line through encoding/json, whose answer is the
// reference (FuzzDecodeFast). A 20-day run's logs are 2.3 million lines,
// and encoding/json's reflection alone is a third of analysing them.
func decodeFast(b []byte) (e Event, ok bool) {
	if len(b) < 2 || b[0] != '{' {
		return Event{}, false
	}
	i := 1
	for {
		// "key":
		if i >= len(b) || b[i] != '"' {
			return Event{}, false
		}
		k0 := i + 1
		i = k0
		for i < len(b) && b[i] != '"' {
			if b[i] == '\\' {
				return Event{}, false
			}
			i++
		}
		if i+1 >= len(b) || b[i+1] != ':' {
			return Event{}, false
		}
		key := b[k0:i]
		i += 2
		// value
		var (
			s   string
			u   uint64
			n   int64
			err bool
		)
		switch string(key) {
		case "agent", "kind", "token", "peer", "addr", "reason", "role", "link", "profile", "detail":
			s, i, err = fastString(b, i)
		case "seq", "session", "nonce", "seed":
			u, i, err = fastUint(b, i)
		case "mono_ns", "wall_ns", "latency_ns", "return_ns", "local_ns", "attempt", "version":
			n, i, err = fastInt(b, i)
		case "cert":
			switch {
			case hasAt(b, i, "true"):
				e.Cert, i = true, i+4
			case hasAt(b, i, "false"):
				e.Cert, i = false, i+5
			default:
				err = true
			}
		default:
			return Event{}, false
		}
		if err {
			return Event{}, false
		}
		switch string(key) {
		case "agent":
			e.Agent = s
		case "kind":
			e.Kind = Kind(s)
		case "token":
			e.Token = s
		case "peer":
			e.Peer = s
		case "addr":
			e.Addr = s
		case "reason":
			e.Reason = s
		case "role":
			e.Role = s
		case "link":
			e.Link = s
		case "profile":
			e.Profile = s
		case "detail":
			e.Detail = s
		case "seq":
			e.Seq = u
		case "session":
			e.Session = u
		case "nonce":
			e.Nonce = u
		case "seed":
			e.Seed = u
		case "mono_ns":
			e.MonoNS = n
		case "wall_ns":
			e.WallNS = n
		case "latency_ns":
			e.LatencyNS = n
		case "return_ns":
			e.ReturnNS = n
		case "local_ns":
			e.LocalNS = n
		case "attempt":
			e.Attempt = int(n)
		case "version":
			e.Version = int(n)
		}
		if i >= len(b) {
			return Event{}, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '}' {
			return Event{}, false
		}
		// The object ends the line.
		if i+2 != len(b) || b[i+1] != '\n' || !known[e.Kind] {
			return Event{}, false
		}
		return e, true
	}
}

func hasAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// fastString reads a JSON string of printable ASCII without escapes.
func fastString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, true
	}
	j := i + 1
	for j < len(b) {
		c := b[j]
		if c == '"' {
			return string(b[i+1 : j]), j + 1, false
		}
		if c < 0x20 || c == '\\' || c >= 0x80 {
			return "", i, true
		}
		j++
	}
	return "", i, true
}

// digits returns the end of a JSON integer's digits from i: "0" or a
// non-zero digit and more digits; fail if there are none or a fraction
// or exponent follows (encoding/json would refuse it for an integer
// field, with an error of its own).
func digits(b []byte, i int) (int, bool) {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if j == i || (b[i] == '0' && j > i+1) || (j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E')) {
		return j, true
	}
	return j, false
}

func fastUint(b []byte, i int) (uint64, int, bool) {
	j, bad := digits(b, i)
	if bad {
		return 0, i, true
	}
	u, err := strconv.ParseUint(string(b[i:j]), 10, 64)
	return u, j, err != nil
}

func fastInt(b []byte, i int) (int64, int, bool) {
	d := i
	if d < len(b) && b[d] == '-' {
		d++
	}
	j, bad := digits(b, d)
	if bad {
		return 0, i, true
	}
	n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
	return n, j, err != nil
}
