//go:build race

package main

// raceDetector is true in a binary built with -race.
const raceDetector = true
