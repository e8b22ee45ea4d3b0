// Package postgres is an idempotency.Store in PostgreSQL that commits a
// request's record in the same transaction as the handler's own writes,
// so that the effect of a keyed request happens at most once even when
// the process dies between its write and its answer. It is a module of
// its own (on pgx v5), so the library's go.mod carries no database
// driver.
//
// The handler takes the transaction from its request's context with Tx
// and writes through it; it must not commit it: idempotency.Handler
// commits it with the record once the handler returns, and holds the
// whole answer until then (however large, flushed or not). The record is
// kept if and only if the handler's writes commit, with these exceptions
// that keep the handler's word:
//
//   - a handler that rolls back (a validation failure after a write)
//     leaves no record: a retry runs it again;
//   - a handler that answers a 5xx has its writes rolled back, and no
//     record: nothing happened, so a retry runs it again (a store that
//     cannot undo the effect keeps the 5xx instead);
//   - a handler whose statement failed (which aborts the transaction)
//     and that answers 4xx (the conflict its insert found) has that
//     answer kept, alone; one that answers a success over the failure is
//     not believed: 503;
//   - a commit that fails answers 503 in place of the handler's answer,
//     and nothing happened.
//
// What each outcome leaves, for a request A whose key is in the table:
//
//   - A's handler returns: its writes and its record commit together; a
//     retry gets the record replayed. If the process dies after the
//     commit and before the answer, the retry still gets it.
//   - The process dies before the commit: PostgreSQL rolls the
//     transaction back, and the claim stays until its lease ends (the
//     handler's Config.Lease); a retry then runs the handler.
//   - A's lease ends while its handler runs, and a retry B claims the
//     key: A's commit is refused (ErrNotCommitted, a 503 for A), and B's
//     run is the one that counts.
//
// Each request in flight holds one pooled connection, for its
// transaction, from its claim to its answer: size the pool for the
// keyed requests a process runs at once. A replay, and a 409 while a
// request is in flight, only read, but take a connection for it like any
// query: when every connection holds a transaction, they wait for one. Records whose keep has ended
// stay in the table, where a new claim of their key overwrites them;
// DeleteExpired removes them.
package postgres
