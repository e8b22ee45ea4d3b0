package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A headline is one contrast of the summary the table opens with: what a
// source system does in a scenario, then what retrystack does (its
// defaults, unless the label says what more), both from rows of this run.
type headline struct {
	title    string
	rows     []string // the rows it reads, by id; it is left out unless all ran and reproduced
	them, us string   // who does what say returns
	say      func(by map[string]row) (theirs, ours string)
}

var headlines = []headline{
	{
		title: "a POST meets a 503",
		rows:  []string{"seed003/naive-post-orders"},
		them:  "reqwest, a retry-on-503 classifier", us: "retrystack's defaults",
		say: func(by map[string]row) (string, string) {
			r := by["seed003/naive-post-orders"]
			return fmt.Sprintf("sends it %s, %s written",
					times(sum(r.got.ServerRequests)), plural(atoi(r.got.Extra["orders_written"]), "order")),
				fmt.Sprintf("sends it %s, %s written (stop %s)",
					times(sum(r.ours.ServerRequests)), plural(atoi(r.ours.Extra["orders_written"]), "order"), r.ours.Stop)
		},
	},
	{
		title: "a retried login's Set-Cookie",
		rows:  []string{"seed003/naive-login-then-me", "field/cookie-under-transport"},
		them:  "reqwest", us: "retrystack, the login keyed",
		// retrystack's defaults do not retry an unkeyed login, and keep
		// cookies only in a jar: the http.Client's, over NewTransport.
		say: func(by map[string]row) (string, string) {
			return fmt.Sprintf("drops the 503's cookie: the next request carries %q",
					by["seed003/naive-login-then-me"].got.Extra["me_cookie"]),
				fmt.Sprintf("both reach the client's jar over NewTransport: %q",
					by["field/cookie-under-transport"].got.Extra["me_cookie"])
		},
	},
	{
		title: "the retries run out on 503",
		rows:  []string{"seed000/forhost-503-get-503"},
		them:  "reqwest", us: "retrystack's defaults",
		say: func(by map[string]row) (string, string) {
			r := by["seed000/forhost-503-get-503"]
			return fmt.Sprintf("Ok(%s) after %s, and nothing marks it", r.got.Result, plural(sum(r.got.ServerRequests), "request")),
				fmt.Sprintf("the %s after %s, as net/http returns it, marked: stop %s, pitfall %s; FailOnExhausted makes it an error",
					r.ours.Result, plural(sum(r.ours.ServerRequests), "request"), r.ours.Stop, r.ours.Extra["pitfalls"])
		},
	},
	{
		title: "a server that only fails, 3 GETs (a retry storm)",
		rows:  []string{"seed000/budget-none", "seed000/budget-default"},
		them:  "reqwest, 1000 retries allowed", us: "retrystack's defaults",
		say: func(by map[string]row) (string, string) {
			none, budget := by["seed000/budget-none"], by["seed000/budget-default"]
			return fmt.Sprintf("%s without a budget; %d with its default budget, tower's",
					plural(sum(none.got.ServerRequests), "request"), sum(budget.got.ServerRequests)),
				fmt.Sprintf("%s: at most %s a GET, and a budget that only successes refill", plural(sum(none.ours.ServerRequests), "request"),
					plural(none.ours.ServerRequests[0], "attempt"))
		},
	},
	{
		title: "a chain of services, caller → S1 → S2 → S3, S3 failing",
		rows:  []string{"chain/naive-3-layers", "chain/one-layer-retries"},
		them:  "every layer retrying 3 times", us: "retrystack, cross-layer signals",
		say: func(by map[string]row) (string, string) {
			naive, one := by["chain/naive-3-layers"].got.ServerRequests, by["chain/one-layer-retries"].got.ServerRequests
			return fmt.Sprintf("S3 sees %s for one GET", plural(naive[len(naive)-1], "request")),
				fmt.Sprintf("only the layer next to S3 retries: S3 sees %d", one[len(one)-1])
		},
	},
	{
		title: "a metastable failure: capacity at 40 % for 1 s, attempts timing out after 500 ms",
		rows:  []string{"overload/metastable-naive", "overload/metastable-default"},
		them:  "clients retrying 4 times at once", us: "retrystack's defaults",
		say: func(by map[string]row) (string, string) {
			return fmt.Sprintf("keep it down: %s %% of operations succeed in the 3 s after",
					by["overload/metastable-naive"].got.Extra["goodput_after_pct"]),
				fmt.Sprintf("recover %s ms after the trigger ends", by["overload/metastable-default"].got.Extra["recovered_ms"])
		},
	},
}

// printSummary prints the headlines whose rows ran and reproduced: the
// title, what the source system does, what retrystack does.
func printSummary(w io.Writer, rows []row) {
	by := make(map[string]row, len(rows))
	for _, r := range rows {
		if len(r.deviations) == 0 {
			by[r.sc.id] = r
		}
	}
	var out []string
	for _, h := range headlines {
		ran := true
		for _, id := range h.rows {
			r, ok := by[id]
			ran = ran && ok && (!reproduces(r.sc) || r.ours != nil)
		}
		if !ran {
			continue
		}
		theirs, ours := h.say(by)
		for i, l := range wrap(fmt.Sprintf("%s (%s)", h.title, strings.Join(h.rows, ", ")), 116) {
			out = append(out, "  "+strings.Repeat("  ", min(i, 1))+l)
		}
		pad := max(len([]rune(h.them)), len([]rune(h.us))) + 2
		for _, c := range [][2]string{{h.them, theirs}, {h.us, ours}} {
			for i, l := range wrap(c[1], 112-pad) {
				label := ""
				if i == 0 {
					label = c[0] + ":"
				}
				out = append(out, fmt.Sprintf("      %-*s%s", pad, label, l))
			}
		}
	}
	if len(out) == 0 {
		return
	}
	fmt.Fprintln(w, "At a glance, measured in this run: what a source system does, then what retrystack does.")
	for _, l := range out {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w)
}

// times is "once", "twice" or "n times".
func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s) // a figure the row's expectation has checked
	return n
}
