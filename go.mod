module github.com/da3-go/da3-go

go 1.25.0

require (
	github.com/ollama/ollama v0.17.4
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/image v0.22.0
	golang.org/x/sys v0.46.0 // indirect
	golang.org/x/term v0.44.0 // indirect
)
