package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// The page's files. web/static/viewer.js, the 3D viewer (three.js), is built
// from web/viewer by `make web` (npm); without it the page says the viewer is
// not bundled and everything else works.
//
//go:embed web/static
var webFiles embed.FS

//go:embed openapi.json
var openAPI []byte

func staticFS() fs.FS {
	sub, err := fs.Sub(webFiles, "web/static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// pageCSP keeps the page to its own scripts and styles; images and models are
// shown from blob: and data: URLs made in the page.
const pageCSP = "default-src 'self'; img-src 'self' data: blob:; connect-src 'self' data: blob:; script-src 'self'; style-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// staticHandler serves the page's files; without viewer, viewer.js is
// answered 404 as in a binary built without npm.
func staticHandler(viewer bool) http.Handler {
	files := http.StripPrefix("/static/", http.FileServerFS(staticFS()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !viewer && r.URL.Path == "/static/viewer.js" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func handleIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, staticFS(), "index.html")
}

func handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}

// ViewerBundled reports whether the 3D viewer was built into the binary.
func ViewerBundled() bool {
	_, err := fs.Stat(staticFS(), "viewer.js")
	return err == nil
}
