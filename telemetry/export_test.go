package telemetry

// RedactURL is redactURL, for the tests of package telemetry_test.
var RedactURL = redactURL
