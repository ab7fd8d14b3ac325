package launcher

import (
	"os/signal"
	"regexp"
	"syscall"
)

func syscallIgnore(sig syscall.Signal) { signal.Ignore(sig) }

func regexpFind(s, expr string) string {
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}
