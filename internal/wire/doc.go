// Package wire holds what every layer of the module does the same way at
// the net/http boundary: calling the next RoundTripper as net/http's Client
// would (a nil Body, a nil response, a response with an error), and
// releasing a response the caller will never see without letting it hold
// the operation.
package wire
