package main

import (
	"os"
)

func main() {
	// A child: the coordinator runs this binary again with -role first.
	if len(os.Args) > 2 && os.Args[1] == "-role" {
		os.Exit(runRole(os.Args[2], os.Args[3:]))
	}
	os.Exit(coordinatorMain(os.Args[1:]))
}

// runRole runs a child's role; its exit code.
func runRole(role string, args []string) int {
	switch role {
	case "server":
		return serverMain(args)
	case "clients":
		return clientsMain(args)
	}
	os.Stderr.WriteString("fleet: no role " + role + " (server, clients)\n")
	return 2
}
