module github.com/da3-go/da3-go

go 1.25.0
