package fetch

//go:generate go run ./internal/gen -in ../../shared/published-gguf.sha256 -out table.go

// publishedFile is one row of the generated table.
type publishedFile struct{ file, sha256 string }
