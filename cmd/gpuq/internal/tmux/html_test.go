package tmux

import (
	"strings"
	"testing"
)

func TestHTMLColours(t *testing.T) {
	tests := []struct{ screen, want string }{
		{"plain <text>", "plain &lt;text&gt;"},
		{"\x1b[38;5;208mORANGE\x1b[39m rest", `<span style="color:#ff8700">ORANGE</span> rest`},
		{"\x1b[1;7mREV\x1b[0m", `<span style="color:#1e1e1e;background:#d4d4d4;font-weight:bold">REV</span>`},
		{"\x1b[38;2;1;2;3;48;5;236mX\x1b[m", `<span style="color:#010203;background:#303030">X</span>`},
		{"\x1b[91mred\x1b[2m faint", `<span style="color:#f14c4c">red</span><span style="color:#f14c4c;opacity:.6"> faint</span>`},
	}
	for _, tt := range tests {
		page := HTML(tt.screen)
		if !strings.Contains(page, "<pre>"+tt.want+"\n</pre>") {
			t.Errorf("%q:\n got %s\nwant %s", tt.screen, page[strings.Index(page, "<pre>"):], tt.want)
		}
	}
}
