// Package crashtest runs an HTTP server in a child process that a test
// kills (SIGKILL) at the moment it chooses and starts again: the store
// tests prove with it what survives a process that dies between its write
// and its answer.
package crashtest
