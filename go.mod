module github.com/da3-go/da3-go

go 1.25.0

require (
	github.com/ollama/ollama v0.17.4
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
