package msg

// Owner is the server responsible for token name among servers in the
// given states (001 "Token distribution"): the name's hash seeds a
// pseudorandom generator, the generator orders the servers, and the first
// one that is not DOWN serves the token. BOOTING counts as active: a
// BOOTING server is responsible, it just answers nothing yet. It returns
// -1 when every server is DOWN.
//
// The hash is FNV-1a (64 bits) and the generator SplitMix64, both written
// here so that placement never changes with the Go release: servers and
// clients of different builds must agree on it. When a server goes DOWN
// only its names move (to the next server of each name's own sequence),
// which is what "minimizes reassignment" asks.
func Owner(name string, states []State) int {
	n := len(states)
	if n == 0 {
		return -1
	}
	seq := Sequence(name, n)
	for _, i := range seq {
		if states[i] != Down {
			return i
		}
	}
	return -1
}

// Sequence is the name's permutation of the n server indexes.
func Sequence(name string, n int) []int {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	// Fisher-Yates with SplitMix64.
	for i := n - 1; i > 0; i-- {
		h += 0x9e3779b97f4a7c15
		z := h
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		j := int(z % uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}
