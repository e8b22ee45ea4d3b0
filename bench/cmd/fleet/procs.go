package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The coordinator's processes: the children it starts from its own binary
// (the server, the client processes) and the redis-server. Every one is
// started with exec.CommandContext in a process group of its own
// (detach), so that the context's end, or stop, kills it and whatever it
// started; none outlives the coordinator.

// child is a process started from the coordinator's binary in a role.
type child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	cancel context.CancelFunc
	exited chan struct{} // closed once Wait returned
}

// received is a message from a child, or the end of its stdout (done).
type received struct {
	from *child
	msg  message
	done bool
	err  error
}

// startChild starts self in role with args; every line it writes on its
// stdout that is a message goes to out, then a done. Its stderr is ours.
func startChild(ctx context.Context, self, name string, out chan<- received, args ...string) (*child, error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, self, args...)
	detach(cmd)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, cancel: cancel, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20) // a result line holds every operation of the process
		for sc.Scan() {
			var m message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.Type == "" {
				fmt.Fprintf(os.Stderr, "%s: %s\n", name, sc.Bytes())
				continue
			}
			select {
			case out <- received{from: c, msg: m}:
			case <-ctx.Done(): // stopped: no one reads any more
			}
		}
		err := cmd.Wait()
		close(c.exited)
		select {
		case out <- received{from: c, done: true, err: errors.Join(sc.Err(), err)}:
		case <-ctx.Done():
		}
	}()
	return c, nil
}

// send writes v as a line on the child's stdin.
func (c *child) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = c.stdin.Write(append(b, '\n'))
	return err
}

// stop kills the child's process group and waits for it to be reaped.
func (c *child) stop() {
	c.cancel() // cmd.Cancel: SIGKILL to the group
	<-c.exited
	_ = killGroup(c.cmd) // anything the child started and left behind
}

// redisServer is the redis-server the shared variants use: started on a
// free port of 127.0.0.1, without persistence, in a directory of its own.
type redisServer struct {
	bin, dir string
	port     int
	ctx      context.Context
	cmd      *exec.Cmd
	exited   chan struct{}
}

// startRedis starts bin (redis-server) and waits until it answers PING.
func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("the shared cells need a redis-server: %w (install redis-server, or put it on PATH, or pass -redis-server)", err)
	}
	dir, err := os.MkdirTemp("", "fleet-redis-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &redisServer{bin: path, dir: dir, port: port, ctx: ctx}
	if err := r.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// Addr is the redis-server's host:port.
func (r *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// start runs redis-server on r.port and waits until it answers.
func (r *redisServer) start() error {
	cmd := exec.CommandContext(r.ctx, r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	detach(cmd)
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(r.exited) }()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(r.ctx, 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-r.exited:
			return fmt.Errorf("redis-server on port %d exited at start (port taken?)", r.port)
		default:
		}
		if time.Now().After(deadline) || r.ctx.Err() != nil {
			r.kill()
			return fmt.Errorf("redis-server on port %d does not answer: %w", r.port, err)
		}
		time.Sleep(20 * time.Millisecond) // it is starting: poll until it listens
	}
}

// kill sends SIGKILL to the redis-server, by its PID, and reaps it.
func (r *redisServer) kill() {
	if r.cmd == nil {
		return
	}
	_ = killGroup(r.cmd)
	<-r.exited
	r.cmd = nil
}

// stop kills the redis-server and removes its directory.
func (r *redisServer) stop() {
	r.kill()
	os.RemoveAll(r.dir)
}

// freePort is a port of 127.0.0.1 no one listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
