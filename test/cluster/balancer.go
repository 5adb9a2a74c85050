package cluster

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// balancer stands in for a Service in front of several replicas: it accepts TCP connections on a
// loopback port and hands each to the next live backend in turn (TLS passes through it untouched).
// A backend it cannot reach is skipped, as a Service's endpoints drop a Pod that went away.
type balancer struct {
	port     int
	listener net.Listener

	mu       sync.Mutex
	backends []string // by replica; "" when the replica is not running
	next     int
	sent     []atomic.Int64
}

// newBalancer listens on a free loopback port for replicas backends.
func newBalancer(replicas int) (*balancer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{port: l.Addr().(*net.TCPAddr).Port, listener: l, backends: make([]string, replicas), sent: make([]atomic.Int64, replicas)}
	go b.serve()
	return b, nil
}

func (b *balancer) set(i int, address string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends[i] = address
}

func (b *balancer) counts() []int64 {
	out := make([]int64, len(b.sent))
	for i := range b.sent {
		out[i] = b.sent[i].Load()
	}
	return out
}

func (b *balancer) close() { _ = b.listener.Close() }

func (b *balancer) serve() {
	for {
		conn, err := b.listener.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		go b.forward(conn)
	}
}

// forward pipes one connection to the first backend, in turn from the next one, that answers.
func (b *balancer) forward(conn net.Conn) {
	defer conn.Close()
	b.mu.Lock()
	start := b.next
	b.next = (b.next + 1) % len(b.backends)
	order := make([]string, len(b.backends))
	for k := range b.backends {
		order[k] = b.backends[(start+k)%len(b.backends)]
	}
	b.mu.Unlock()
	for k, address := range order {
		if address == "" {
			continue
		}
		backend, err := net.Dial("tcp", address)
		if err != nil {
			continue
		}
		b.sent[(start+k)%len(b.backends)].Add(1)
		pipe(conn, backend)
		return
	}
}

// pipe copies both ways until either side ends, then closes the backend.
func pipe(conn, backend net.Conn) {
	defer backend.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, backend); done <- struct{}{} }()
	<-done
}
