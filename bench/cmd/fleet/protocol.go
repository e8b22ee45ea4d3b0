package main

// What the coordinator and its children say to each other: each child
// writes JSON lines on its stdout (a message), the coordinator writes one
// line on a client process's stdin (go) when the run may start. A child
// whose stdin closes exits: its coordinator has gone.

// message is a line a child writes on its stdout.
type message struct {
	// Type is addr (the server's first line), ready (a client process has
	// built its clients and, when it shares, exchanged with Redis), event
	// (its Fleet's observer was told something) or result (its last line).
	Type string `json:"type"`
	Proc int    `json:"proc"`

	Addr string `json:"addr,omitempty"` // addr: host:port the server listens on

	// event: the event's name, when it happened (Unix ns) and its
	// attributes.
	Name  string            `json:"name,omitempty"`
	At    int64             `json:"at,omitempty"`
	Attrs map[string]string `json:"attrs,omitempty"`

	// result: the operations of this process, by their index in the
	// fleet's schedule (operation i starts i/rate after the start), and
	// whether each ended 200 in time.
	Index []int  `json:"index,omitempty"`
	OK    []bool `json:"ok,omitempty"`
	// Attempts is how many requests the process's clients sent (counted
	// on their transport, below every retry layer).
	Attempts int64 `json:"attempts,omitempty"`
	// Shared is whether the process's Fleet was sharing at the end (a
	// shared variant's only).
	Shared bool `json:"shared,omitempty"`
}

// goLine is the coordinator's word to a client process: start the
// schedule at Start (Unix ns, the wall clock every process of the fleet
// reads).
type goLine struct {
	Start int64 `json:"start"`
}

// serverStats is the server's GET /control/stats.
type serverStats struct {
	// Requests is every request of the experiment's paths (not /control);
	// Served those the overload model answered 200, Wasted those it
	// served after their caller had gone.
	Requests, Served, Wasted int64
	// AtTrigger and AtIncidentEnd are Requests when the trigger started
	// and overload.IncidentSpan after it ended (-1: not yet).
	AtTrigger, AtIncidentEnd int64
}

// quotaLog is the server's GET /control/quota: when the first request
// answered 429 arrived and when the hold it started ended (both Unix ns,
// 0 if none was; later holds are not its), and when every request to
// /quota arrived.
type quotaLog struct {
	First429, Until int64
	Times           []int64
}
