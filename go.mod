module github.com/retrystack/retrystack

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/sethvargo/go-retry v0.5.0
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
)

require golang.org/x/text v0.43.0 // indirect
