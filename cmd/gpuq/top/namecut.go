package top

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// NameCut is how the cells of one column of names (key=value,...: jobs' names,
// points, groups) are shortened, every cell of the column alike, so that one row does
// not read task=glue-mrpc where the next reads glue-tvt_qnli, nor one point's value go
// without its key while the next keeps it (sst2,1 above rte,s…=1). Its stages are
// CutName's, in CutName's order, but taken by the column as a whole: the keys of text
// values go, then the other keys lose their ends, then the text values their starts,
// then every key goes. gpuq results takes them one by one between its other columns'
// concessions (see resultsFit); gpuq status, run and top take them through CutNames.
type NameCut struct {
	TextKeys bool // the keys of text values are left out (glue-sst2,lr=1e-4)
	Key      int  // other keys keep at most this many cells, "…" included; 0: whole
	Text     int  // text values keep at most this many cells of their end, "…" included; 0: whole
	NoKeys   bool // every key is left out, the values whole (but as Text cuts them) and in their order
	Width    int  // the last resort, below what the column needs with every value whole: cut to Width (CutName)
}

// Cut is name s cut as c says.
func (c NameCut) Cut(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		k, v, _, text, cutStart := partOf(p)
		switch {
		case k == "":
		case c.NoKeys || text && c.TextKeys:
			k = ""
		case c.Key > 0 && ansi.StringWidth(k) > c.Key:
			k = ansi.Truncate(k, c.Key, "…")
		}
		if cutStart && c.Text > 0 && ansi.StringWidth(v) > c.Text {
			v = "…" + tail(v, c.Text-1)
		}
		if k != "" {
			v = k + "=" + v
		}
		parts[i] = v
	}
	out := strings.Join(parts, ",")
	if c.Width > 0 {
		return CutName(out, c.Width)
	}
	return out
}

// partOf splits one part of a name, key=value or a value alone: its key ("" for a
// part without one, keyed false), its value, whether that is text (no number), and
// whether the text may lose its start (cutStart): a text value that is no size (26GiB)
// nor anything else that begins as a number does.
func partOf(p string) (key, val string, keyed, text, cutStart bool) {
	if key, val, keyed = strings.Cut(p, "="); !keyed {
		key, val = "", p
	}
	_, err := strconv.ParseFloat(val, 64)
	text = err != nil
	return key, val, keyed, text, text && !strings.ContainsAny(val[:min(1, len(val))], "0123456789.+-")
}

// namePart is one key=value of a name as columnCut counts it: the cells of its key
// (0 for a part without one) and of its value.
type namePart struct {
	keyW, valW int
	text       bool // a value that is no number, whose key goes with TextKeys
	cutStart   bool // a text value that may lose its start (see partOf)
}

// columnCut is the least cut of CutName's stages, taken by the whole column alike
// (see NameCut), that fits every one of names in width cells and still tells apart the
// names that differ in their text values; false where even with every key gone and
// the text values down to "…" and three cells (or as many as tell them apart) some
// name is too long. It counts the names' widths rather than cutting them, but for
// telling the text values' ends apart, so that a queue of 100,000 names takes little
// longer than cutting each once.
func columnCut(names []string, width int) (NameCut, bool) {
	var c NameCut
	distinctNames := map[string]bool{}
	var parsed [][]namePart
	longestKey, widestText := 0, 0
	for _, n := range names {
		if distinctNames[n] {
			continue
		}
		distinctNames[n] = true
		var ps []namePart
		for _, p := range strings.Split(n, ",") {
			k, v, ok, text, cutStart := partOf(p)
			np := namePart{valW: ansi.StringWidth(v), text: text, cutStart: cutStart}
			if ok {
				np.keyW = ansi.StringWidth(k)
				longestKey = max(longestKey, np.keyW)
			}
			if np.cutStart {
				widestText = max(widestText, np.valW)
			}
			ps = append(ps, np)
		}
		parsed = append(parsed, ps)
	}
	// cells is the widest of the names as c cuts them; fits whether that is width or less.
	cells := func(c NameCut) int {
		most := 0
		for _, ps := range parsed {
			n := len(ps) - 1 // the commas
			for _, p := range ps {
				switch {
				case p.keyW == 0, c.NoKeys, p.text && c.TextKeys:
				case c.Key > 0 && p.keyW > c.Key:
					n += c.Key + 1
				default:
					n += p.keyW + 1
				}
				if p.cutStart && c.Text > 0 && p.valW > c.Text {
					n += c.Text
				} else {
					n += p.valW
				}
			}
			most = max(most, n)
		}
		return most
	}
	fits := func(c NameCut) bool { return cells(c) <= width }
	// apart reports whether the names that differ still read differently as c cuts
	// them: a text value's end may be all that tells two apart (…qnli, …wnli).
	apart := func(c NameCut) bool {
		seen := make(map[string]bool, len(distinctNames))
		for n := range distinctNames {
			k := c.Cut(n)
			if seen[k] {
				return false
			}
			seen[k] = true
		}
		return true
	}
	if fits(c) {
		return c, true
	}
	c.TextKeys = true
	if fits(c) {
		return c, true
	}
	if longestKey > 2 {
		for c.Key = longestKey; c.Key > 2 && !fits(c); c.Key-- {
		}
		if fits(c) {
			return c, true
		}
	}
	// The text values lose their starts, down to "…" and three cells, all of them
	// alike, but no further than still tells the names apart: fewer cells of their
	// ends tell fewer apart, so the least that fits is tried first, then a cell more
	// until they read apart.
	if widestText > LeastText {
		keep := apart(c) // names that a cut of their keys read alike already cannot be told apart by their ends
		c.Text = widestText
		for c.Text > LeastText && !fits(c) {
			c.Text--
		}
		for keep && c.Text < widestText && !apart(c) {
			c.Text++
		}
		if c.Text >= widestText {
			c.Text = 0
		}
		if fits(c) {
			return c, true
		}
	}
	// Every key goes; the text values take back what room that leaves them.
	c.NoKeys, c.TextKeys, c.Key = true, false, 0
	for c.Text > 0 && c.Text < widestText && fits(NameCut{NoKeys: true, Text: c.Text + 1}) {
		c.Text++
	}
	if c.Text >= widestText {
		c.Text = 0
	}
	return c, fits(c)
}

// LeastText is the fewest cells a text value keeps of its end: "…" and three, as
// CutName keeps.
const LeastText = 4
