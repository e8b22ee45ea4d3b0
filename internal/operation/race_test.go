//go:build race

package operation

// raceDetector is true in a binary built with -race, whose sync.Pool
// drops some of what it is given: allocation counts do not hold there.
const raceDetector = true
