package browser

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"
)

// Render opens a page file in a fresh headless Chromium with a viewport of width ×
// height, runs check on it, and returns a screenshot of the whole page. The test fails
// if the page reported an error or asked for anything but itself (a report must work
// with no network). Without Chromium the test is skipped, saying how to install it.
func Render(t testing.TB, file string, width, height int, check func(context.Context, *Page)) []byte {
	t.Helper()
	path, err := Find()
	if err != nil {
		t.Skipf("%v: the browser test is skipped (.ci/run installs it as root)", err)
	}
	b, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	u := (&url.URL{Scheme: "file", Path: abs}).String()
	p, err := b.Open(ctx, u, width, height)
	if err != nil {
		t.Fatal(err)
	}
	if check != nil {
		check(ctx, p)
	}
	shot, err := p.Screenshot(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range p.Errors() {
		t.Errorf("the page reported: %s", e)
	}
	for _, r := range p.Requests() {
		if r != u {
			t.Errorf("the page asked for %s: a report must need no network", r)
		}
	}
	return shot
}
