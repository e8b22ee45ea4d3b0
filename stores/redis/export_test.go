package redis

// TestRedis is testClient, for the tests of package redis_test.
var TestRedis = testClient
