package launcher

import (
	"net"
	"sync"
)

// StartServed runs an attempt as Start does, with its log in its directory dir, and
// serves its terminal on the directory's socket as a supervisor serves its trainer's:
// attach and attach-ro (the scrollback, then live, keystrokes to the trainer), stop
// and wait. gpuq run's attempts, its own children, are reached so by gpuq attach as a
// daemon's are. The socket goes when the attempt ends.
func StartServed(c Command, dir, header string) (*Process, error) {
	ln, p, h, err := begin(dir, Spec{Command: c, Header: header})
	if err != nil {
		return nil, err
	}
	end := &ending{done: make(chan struct{})}
	var waiting sync.WaitGroup
	go accept(ln, p, h, end, &waiting)
	go func() {
		<-p.Done()
		h.close()
		end.ended = endedOf(p, c.Argv)
		close(end.done)
		drainBacklog(dir)
		ln.Close()
		waiting.Wait()
	}()
	return p, nil
}

// accept serves each client that connects to an attempt's socket, until the socket
// is closed; waiting counts those being served.
func accept(ln net.Listener, p *Process, h *hub, end *ending, waiting *sync.WaitGroup) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		waiting.Add(1)
		go func() {
			defer waiting.Done()
			serveClient(c, p, h, end)
		}()
	}
}
