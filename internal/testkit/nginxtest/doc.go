// Package nginxtest starts a real nginx for a test: Debian's nginx-light
// (or any nginx on PATH or at /usr/sbin/nginx) on 127.0.0.1, on a free
// port, with a configuration of the test's own. Everything nginx writes
// (its pid file, error and access logs, and every *_temp_path) goes to a
// temporary directory; nginx runs in the foreground (daemon off, one
// process: master_process off) as the current user and is stopped by its
// PID when the test ends.
//
// The access log is written in a fixed, parseable format (see [Entry]),
// one line per request nginx finished, so a test can compare what a
// client says it sent with what the proxy received, send by send.
//
// Where nginx is missing, [Start] skips the test with a message that says
// so, unless the environment variable NGINX_REQUIRED is 1 (CI's
// scripts/nginx-test.sh), where it fails it.
package nginxtest
