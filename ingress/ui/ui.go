package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Prefix is the path the app is served under.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every answer: the app loads
// scripts, styles and data from its own origin only; images may also be
// data: URLs.
const CSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"

//go:embed static
var static embed.FS

// contentTypes are the types of the files the app is made of; any other
// extension falls back to the mime package's table.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
}

// file is one embedded file, ready to serve.
type file struct {
	name  string
	data  []byte
	ctype string
	etag  string
}

// Handler serves the embedded app under Prefix: index.html at Prefix
// itself, every other file at Prefix + its name; GET and HEAD only (405
// otherwise), 404 for a path that names no file.
func Handler() http.Handler {
	files := embedded()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		n, ok := name(r.URL.Path)
		f, found := files[n]
		if !ok || !found {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.ctype)
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", f.etag)
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.data))
	})
}

// Files lists the names of the embedded files (each served at Prefix +
// its name), sorted.
func Files() []string {
	return slices.Sorted(maps.Keys(embedded()))
}

// secure sets the headers every answer carries.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// name is the file a request path names: index.html for Prefix itself;
// false outside Prefix.
func name(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, Prefix)
	if ok && rest == "" {
		rest = "index.html"
	}
	return rest, ok
}

// embedded is the embedded files, read once.
var embedded = sync.OnceValue(load)

// load reads every embedded file under static/ into a map by name.
func load() map[string]file {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees static/
	}
	files := map[string]file{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[p] = file{name: p, data: b, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // reading an embed.FS does not fail
	}
	return files
}

// contentType is the Content-Type of the file named p.
func contentType(p string) string {
	ext := path.Ext(p)
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}
