package plans

// notify: whom a sweep tells when it ends (and, if asked, when a job fails), so that a
// researcher hears of a finished or broken sweep without watching it.

import (
	"net/url"
	"slices"
)

// Notify is a sweep's hooks: a command run with the sweep's JSON summary on its
// standard input, and a webhook the summary is POSTed to; either may be unset.
type Notify struct {
	Command []string // argv, run in the workdir; nil: none
	Webhook string   // an http(s) URL; "": none
	// OnEnd: when the sweep's last job has ended; OnFailure: when a job fails for good.
	OnEnd, OnFailure bool
}

// Hooked reports whether the sweep has any hook.
func (n Notify) Hooked() bool { return len(n.Command) > 0 || n.Webhook != "" }

// Notification events.
const (
	NotifyEnd     = "end"
	NotifyFailure = "failure"
)

var notifyKeys = []string{"command", "webhook", "on"}

// notify reads `notify: {command: [...], webhook: URL, on: [end, failure]}`; on
// defaults to the end alone.
func (c *checker) notify(doc *Map) Notify {
	v, ok := doc.Get("notify")
	if !ok || v == nil {
		return Notify{}
	}
	m, ok := v.(*Map)
	if !ok {
		c.fail("notify", "write a mapping, e.g. notify: {command: [notify-send, gpuq], webhook: https://hooks.example.com/x, on: [end, failure]}")
		return Notify{}
	}
	var n Notify
	for _, k := range m.Keys {
		if !slices.Contains(notifyKeys, k) {
			c.fail("notify."+k, "unknown key%s; notify has command, webhook and on", Suggest(k, notifyKeys))
		}
	}
	if v, ok := m.Get("command"); ok {
		n.Command = c.argv("notify.command", v, `[notify-send, "sweep done"]`)
	}
	if w, ok := m.Get("webhook"); ok {
		s, _ := w.(string)
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.fail("notify.webhook", "%s is not an http(s) URL: write e.g. https://hooks.slack.com/services/...", FormatValue(w))
		} else {
			n.Webhook = s
		}
	}
	_, cmd := m.Get("command")
	_, hook := m.Get("webhook")
	if !cmd && !hook {
		c.fail("notify", "give a command, a webhook, or both")
	}
	n.OnEnd, n.OnFailure = c.notifyOn(m)
	return n
}

// notifyOn reads notify.on: end, failure, or a list of them.
func (c *checker) notifyOn(m *Map) (end, failure bool) {
	v, ok := m.Get("on")
	if !ok {
		return true, false
	}
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	for _, e := range list {
		switch e {
		case NotifyEnd:
			end = true
		case NotifyFailure:
			failure = true
		default:
			c.fail("notify.on", "%s is not an event: write end, failure, or [end, failure]", FormatValue(e))
		}
	}
	return end, failure
}
