// Package overload reproduces, in process and in compressed time, the
// retry experiment of Huang et al., "Metastable Failures in the Wild"
// (OSDI '22): a service of fixed capacity under an open-loop load, a
// trigger that takes some of its capacity away for a while, and clients
// that retry. Naive clients (4 retries at once, no budget) keep the
// service down after the trigger ends; clients whose retries are bounded
// let it recover. The lab's overload/ rows and the bench module's
// comparison run it.
package overload
