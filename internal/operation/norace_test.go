//go:build !race

package operation

const raceDetector = false
