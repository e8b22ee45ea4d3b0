package policy

// StatusSet is a set of HTTP status codes (100-599). The zero value is
// empty. It is a small value: copy it freely; lookups do not allocate.
type StatusSet struct {
	bits [10]uint64 // bit c-100 for code c
}

// NewStatusSet returns the set of codes; codes outside 100-599 are ignored
// (Policy.Validate reports them).
func NewStatusSet(codes ...int) StatusSet {
	var s StatusSet
	for _, c := range codes {
		s = s.With(c)
	}
	return s
}

// RetryableStatuses returns the statuses worth retrying by default:
// 408, 425, 429, 500, 502, 503 and 504. Never 400, 401, 403, 404, 422 or 501.
func RetryableStatuses() StatusSet { return NewStatusSet(408, 425, 429, 500, 502, 503, 504) }

// With returns the set with code added.
func (s StatusSet) With(code int) StatusSet {
	if code >= 100 && code <= 599 {
		s.bits[(code-100)/64] |= 1 << ((code - 100) % 64)
	}
	return s
}

// Has reports whether code is in the set.
func (s StatusSet) Has(code int) bool {
	return code >= 100 && code <= 599 && s.bits[(code-100)/64]&(1<<((code-100)%64)) != 0
}

// Codes returns the codes in ascending order.
func (s StatusSet) Codes() []int {
	var out []int
	for c := 100; c <= 599; c++ {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}
