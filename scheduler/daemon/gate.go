package daemon

// Anyone who reaches a TCP port of the daemon (--listen, --metrics) may open connections
// to it, with no secret, and each costs the daemon a descriptor: enough of them and it
// could open nothing else, not an attempt's log, not /proc. A gate bounds how many
// connections of strangers a listener holds at once: beyond that a new one is closed as
// soon as it is accepted. On --listen a connection stops counting once a request on it
// has shown the secret, and one that has not within a deadline is closed; on --metrics,
// which asks for no secret, every connection counts, and net/http's own timeouts end
// idle ones.

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/gpuq/gpuq/scheduler/runner"
)

const (
	// remoteStrangers is how many connections without the secret --listen holds at
	// once: workers and remote clients that connect at the same moment are far fewer,
	// and each shows its secret within milliseconds.
	remoteStrangers = 64
	// metricsConns is how many connections --metrics holds at once: a scraper or two
	// keeps one each.
	metricsConns = 16
	// showSecretWithin is how long a connection to --listen has to complete its TLS
	// handshake and show the secret.
	showSecretWithin = 10 * time.Second
)

// gate is a listener that holds at most cap(slots) connections that have not been
// admitted.
type gate struct {
	net.Listener
	slots chan struct{}
	// within, if not zero, is how long a connection has to be admitted before it is
	// closed.
	within time.Duration
	// refused, if not nil, hears of each connection closed for want of a slot.
	refused func()
}

func newGate(ln net.Listener, n int, within time.Duration) *gate {
	return &gate{Listener: ln, slots: make(chan struct{}, n), within: within}
}

// Accept returns the next connection for which there is a slot. Its errors are the
// listener's: an http.Server waits and tries again after a temporary one (EMFILE).
func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case g.slots <- struct{}{}:
		default:
			c.Close()
			if g.refused != nil {
				g.refused()
			}
			continue
		}
		gc := &gatedConn{Conn: c, slots: g.slots}
		if g.within > 0 {
			time.AfterFunc(g.within, func() {
				if gc.leave() {
					c.Close()
				}
			})
		}
		return gc, nil
	}
}

// gatedConn is a connection that holds a slot of its gate until it is admitted or
// closed.
type gatedConn struct {
	net.Conn
	slots chan struct{}
	once  sync.Once
}

// leave gives the slot back, once; it reports whether this call did.
func (c *gatedConn) leave() bool {
	left := false
	c.once.Do(func() {
		<-c.slots
		left = true
	})
	return left
}

func (c *gatedConn) Close() error {
	c.leave()
	return c.Conn.Close()
}

// warnFull returns a gate's refused: it logs that the gate refuses connections (what
// says which and why), at most once a minute.
func warnFull(log *runner.EventLog, what string) func() {
	var mu sync.Mutex
	var last time.Time
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) >= time.Minute {
			last = time.Now()
			log.Printf("warning: %s: refusing new connections until some end (a flood?); scheduling goes on", what)
		}
	}
}

type gatedKey struct{}

// withConn keeps a server's connection in its requests' context, for admit (the
// http.Server's ConnContext).
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*gatedConn); ok {
		return context.WithValue(ctx, gatedKey{}, gc)
	}
	return ctx
}

// admit takes the connection of a request whose context is ctx out of its gate's
// count: it has shown the secret.
func admit(ctx context.Context) {
	if gc, ok := ctx.Value(gatedKey{}).(*gatedConn); ok {
		gc.leave()
	}
}
