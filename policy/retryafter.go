package policy

import (
	"net/http"
	"strings"
	"time"
)

// parseRetryAfter also accepts decimal fractions of a second (Python's
// float()) when fractions is set, and only the given date forms.
func parseRetryAfter(value string, now time.Time, fractions bool, dates dateForms) (time.Duration, bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if d, ok := parseSeconds(v, fractions); ok {
		return d, true
	}
	var t time.Time
	var err error
	switch dates {
	case datesAll:
		t, err = http.ParseTime(v)
	case datesIMFOnly:
		t, err = time.Parse(http.TimeFormat, v)
	default:
		return 0, false
	}
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}

// parseSeconds parses 1*DIGIT, or 1*DIGIT "." 1*DIGIT with fractions, capped
// at maxRetryAfter. It does not allocate.
func parseSeconds(v string, fractions bool) (time.Duration, bool) {
	const maxSeconds = int64(maxRetryAfter / time.Second)
	var secs int64
	i := 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if secs < maxSeconds {
			secs = secs*10 + int64(v[i]-'0')
		}
	}
	if i == 0 {
		return 0, false
	}
	d := time.Duration(min(secs, maxSeconds)) * time.Second
	if i == len(v) {
		return d, true
	}
	if !fractions || v[i] != '.' || i+1 == len(v) {
		return 0, false
	}
	var frac time.Duration
	scale := time.Second
	for _, c := range []byte(v[i+1:]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		scale /= 10 // digits past nanoseconds add nothing
		frac += time.Duration(c-'0') * scale
	}
	return min(d+frac, maxRetryAfter), true
}
