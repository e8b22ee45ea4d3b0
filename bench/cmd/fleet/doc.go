// Command fleet proves the retry budget and the pacing holds that
// stores/redis's Fleet shares through Redis with a fleet of real
// processes: an HTTP server process, P client processes of M clients each
// (real TCP connections to the server), and a redis-server, all on
// 127.0.0.1. The in-process fleet experiment (bench.Fleet) runs every
// client in one process; here each process has its own scheduler,
// connection pool and Fleet, and the processes share only what Redis
// carries.
//
// Run it from the bench module:
//
//	go run ./cmd/fleet                     # every cell, about 9 minutes
//	go run ./cmd/fleet -cells overload -clients 100 -rates 600
//	go run ./cmd/fleet -cells overload -variants shared -rates 900 -interval 10ms
//
// It prints one JSON line per cell as it ends, then a table and whether
// each target holds. The cells:
//
//   - overload: the metastable-failure experiment (capacity 1 000 a
//     second, an open load of 600 or 900 operations a second spread over
//     N = 10, 100, 1 000 clients in 10 processes, 3 s of warm-up, 1 s at
//     40 % capacity, 8 s after, attempts timing out after 500 ms) with
//     each client's own budget (local), one Fleet a process (shared), and
//     the guarded peers. About 15 s a cell, 24 cells.
//   - lone: 20 processes of one client, each sending a request a second
//     for 60 s to a server that stalls 5 % of requests and answers 503 to
//     5 %, attempts timing out after 200 ms; local budgets against the
//     shared one. About 2 minutes.
//   - quota: 20 processes of one client against a fleet-wide quota that
//     answers 429 with Retry-After: 10 once exceeded; how many requests
//     reach the server in those 10 s, with the holds shared and without.
//     About 35 s.
//   - kill: the shared overload cell (N = 100, 600 a second), with and
//     without the trigger, redis-server killed (SIGKILL) in the middle and
//     restarted on its port 2 s later, beside the same run without the
//     kill. About a minute.
//
// -interval sets the Fleets' exchange interval (100 ms, the default's): a
// process decides from the fleet's figures of its last exchange plus its
// own counts since, so the longer it is, the more the processes may spend
// of one credit before they see each other's spending.
//
// The coordinator starts its own binary again for the other roles
// (-role server, -role clients), starts redis-server (it must be on
// PATH), and stops every process it started when it ends, by process
// group; a child whose coordinator has gone (its stdin closed) exits.
package main
