package wire

import (
	"net/url"
	"testing"
)

func TestHostKey(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/x":     "api.example.com",
		"https://API.Example.com:443/x": "api.example.com",
		"http://api.example.com:80/":    "api.example.com",
		"http://api.example.com:443/":   "api.example.com:443",
		"https://api.example.com:8443/": "api.example.com:8443",
		"https://api.example.com:80/":   "api.example.com:80",
		"https://bücher.example/":       "xn--bcher-kva.example",
		"https://BÜCHER.example:443/":   "xn--bcher-kva.example",
		"https://[::1]:443/":            "[::1]",
		"http://[::1]:8080/":            "[::1]:8080",
		"http://127.0.0.1:80/":          "127.0.0.1",
		"https://127.0.0.1:10443/":      "127.0.0.1:10443",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := HostKey(u); got != want {
			t.Errorf("HostKey(%s) = %q, want %q", in, got, want)
		}
	}
}
