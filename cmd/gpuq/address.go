package main

import (
	"fmt"
	"net"
	"strconv"
)

// checkAddress checks a network address given to flag: HOST:PORT (the host may be
// left out: this machine), the port a number of 1 to 65535, or 0 where listen (the
// system picks one); example is one to give instead. A port out of range was dialled
// again and again ("invalid port; trying again"), and a missing one taken as HTTPS's.
func checkAddress(flag, addr, example string, listen bool) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		least := 1
		if listen {
			least = 0
		}
		if n, perr := strconv.Atoi(port); perr != nil || n < least || n > 65535 {
			err = fmt.Errorf("port %q is not a number of %d to 65535", port, least)
		}
	}
	if err != nil {
		return badInput("%s %q: %v: give host:port, e.g. %s", flag, addr, err, example)
	}
	return nil
}
