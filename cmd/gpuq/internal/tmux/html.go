package tmux

import (
	"cmp"
	"fmt"
	"html"
	"strconv"
	"strings"
)

// HTML draws a screen read with ScreenANSI as a page of its own, a terminal's colours
// on a dark background, for a browser to take a picture of.
func HTML(screen string) string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body { margin: 0; background: #1e1e1e; }
pre { margin: 0; padding: 10px 12px; color: #d4d4d4; font: 14px/1.25 "DejaVu Sans Mono", monospace; }
</style></head><body><pre>`)
	for _, line := range strings.Split(strings.TrimRight(screen, "\n"), "\n") {
		writeLine(&b, line)
		b.WriteByte('\n')
	}
	b.WriteString("</pre></body></html>\n")
	return b.String()
}

// sgr is the state that Select Graphic Rendition codes set.
type sgr struct {
	fg, bg               string // CSS colours, "" for the default
	bold, faint, reverse bool
}

func (s sgr) style() string {
	fg, bg := s.fg, s.bg
	if s.reverse {
		fg, bg = cmp.Or(bg, "#1e1e1e"), cmp.Or(fg, "#d4d4d4")
	}
	var parts []string
	if fg != "" {
		parts = append(parts, "color:"+fg)
	}
	if bg != "" {
		parts = append(parts, "background:"+bg)
	}
	if s.bold {
		parts = append(parts, "font-weight:bold")
	}
	if s.faint {
		parts = append(parts, "opacity:.6")
	}
	return strings.Join(parts, ";")
}

// writeLine writes one line of text and escape codes as spans.
func writeLine(b *strings.Builder, line string) {
	var st sgr
	open := false
	for len(line) > 0 {
		i := strings.Index(line, "\x1b[")
		text := line
		if i >= 0 {
			text = line[:i]
		}
		if text != "" {
			b.WriteString(html.EscapeString(text))
		}
		if i < 0 {
			break
		}
		rest := line[i+2:]
		end := strings.IndexFunc(rest, func(r rune) bool { return r >= 0x40 && r <= 0x7e })
		if end < 0 {
			break
		}
		if rest[end] == 'm' {
			st = st.apply(rest[:end])
			if open {
				b.WriteString("</span>")
				open = false
			}
			if css := st.style(); css != "" {
				fmt.Fprintf(b, `<span style="%s">`, css)
				open = true
			}
		}
		line = rest[end+1:]
	}
	if open {
		b.WriteString("</span>")
	}
}

// apply reads the parameters of one SGR code.
func (s sgr) apply(params string) sgr {
	ps := strings.Split(params, ";")
	num := func(i int) int { n, _ := strconv.Atoi(ps[i]); return n }
	for i := 0; i < len(ps); i++ {
		switch n := num(i); {
		case n == 0:
			s = sgr{}
		case n == 1:
			s.bold = true
		case n == 2:
			s.faint = true
		case n == 22:
			s.bold, s.faint = false, false
		case n == 7:
			s.reverse = true
		case n == 27:
			s.reverse = false
		case n >= 30 && n <= 37:
			s.fg = palette(n - 30)
		case n >= 90 && n <= 97:
			s.fg = palette(n - 90 + 8)
		case n == 39:
			s.fg = ""
		case n >= 40 && n <= 47:
			s.bg = palette(n - 40)
		case n >= 100 && n <= 107:
			s.bg = palette(n - 100 + 8)
		case n == 49:
			s.bg = ""
		case (n == 38 || n == 48) && i+2 < len(ps) && ps[i+1] == "5":
			c := palette(num(i + 2))
			i += 2
			if n == 38 {
				s.fg = c
			} else {
				s.bg = c
			}
		case (n == 38 || n == 48) && i+4 < len(ps) && ps[i+1] == "2":
			c := fmt.Sprintf("#%02x%02x%02x", num(i+2), num(i+3), num(i+4))
			i += 4
			if n == 38 {
				s.fg = c
			} else {
				s.bg = c
			}
		}
	}
	return s
}

// basic are the 16 colours of xterm's default palette.
var basic = []string{"#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
	"#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"}

// palette is xterm's 256-colour palette: 16 basic colours, a 6×6×6 cube, 24 greys.
func palette(n int) string {
	switch {
	case n < 16:
		return basic[max(n, 0)]
	case n < 232:
		n -= 16
		level := func(v int) int {
			if v == 0 {
				return 0
			}
			return 55 + 40*v
		}
		return fmt.Sprintf("#%02x%02x%02x", level(n/36), level(n/6%6), level(n%6))
	case n < 256:
		g := 8 + 10*(n-232)
		return fmt.Sprintf("#%02x%02x%02x", g, g, g)
	}
	return ""
}
