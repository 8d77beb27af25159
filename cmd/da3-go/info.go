package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/da3-go/da3-go/convert"
	"github.com/da3-go/da3-go/internal/licence"
	"github.com/da3-go/da3-go/internal/schema"
	"github.com/da3-go/da3-go/loader"
)

func init() {
	register(command{
		name:    "info",
		usage:   "da3-go info [-json] [-tensors] FILE.gguf",
		summary: "print a GGUF file's metadata, tensor types and parameter count",
		run:     runInfo,
	})
}

// maxTableElems is how many array elements the table form shows.
const maxTableElems = 8

// infoReport is what info prints; its JSON form is the -json output.
type infoReport struct {
	Path         string       `json:"path"`
	Size         int64        `json:"size"`
	Version      uint32       `json:"version"`
	Alignment    uint64       `json:"alignment"`
	Architecture string       `json:"architecture"`
	Licence      string       `json:"licence,omitempty"` // general.license
	Source       string       `json:"source,omitempty"`  // general.source.url
	Parameters   uint64       `json:"parameters"`
	TensorBytes  uint64       `json:"tensor_bytes"`
	TensorCount  int          `json:"tensor_count"`
	Metadata     []infoKV     `json:"metadata"`
	Types        []infoType   `json:"types"`
	Tensors      []infoTensor `json:"tensors"`

	values []loader.Value // parallel to Metadata, for the table form
}

type infoKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type infoType struct {
	Type     string `json:"type"`
	Count    int    `json:"count"`
	Elements uint64 `json:"elements"`
	Bytes    uint64 `json:"bytes"`
}

type infoTensor struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Shape  []uint64 `json:"shape"`
	Offset uint64   `json:"offset"`
	Size   uint64   `json:"size"`
}

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["info"], stdout, stderr)
	asJSON := fs.Bool("json", false, "print JSON with complete arrays and every tensor")
	listTensors := fs.Bool("tensors", false, "also list every tensor (name, type, shape, bytes, offset)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(fs, stderr, "want one GGUF file, got %d arguments", fs.NArg())
	}
	if err := ctx.Err(); err != nil {
		return fail(stderr, err)
	}
	f, err := loader.Open(fs.Arg(0))
	if err != nil {
		return fail(stderr, err)
	}
	defer f.Close()

	rep := newInfoReport(f)
	if *asJSON {
		err = writeInfoJSON(stdout, rep)
	} else {
		err = writeInfoTable(stdout, rep, *listTensors)
	}
	if err != nil {
		return fail(stderr, fmt.Errorf("write output: %w", err))
	}
	return exitOK
}

func newInfoReport(f *loader.File) *infoReport {
	kv := f.KV()
	rep := &infoReport{
		Path:         f.Path(),
		Size:         f.Size(),
		Version:      f.Version(),
		Alignment:    f.Alignment(),
		Architecture: kv.StringOr(schema.Arch+".arch", kv.StringOr("general.architecture", "")),
		Licence:      kv.StringOr(convert.KeyLicense, ""),
		Source:       kv.StringOr(convert.KeySourceURL, ""),
		Metadata:     []infoKV{},
		Types:        []infoType{},
		Tensors:      []infoTensor{},
	}
	for key, v := range kv.All() {
		rep.Metadata = append(rep.Metadata, infoKV{Key: key, Type: valueTypeName(v), Value: jsonValue(v)})
		rep.values = append(rep.values, v)
	}
	byType := map[loader.Type]*infoType{}
	for _, ti := range f.Tensors() {
		g := byType[ti.Type]
		if g == nil {
			g = &infoType{Type: ti.Type.String()}
			byType[ti.Type] = g
		}
		g.Count++
		g.Elements += ti.Elements()
		g.Bytes += ti.Size
		rep.Parameters += ti.Elements()
		rep.TensorBytes += ti.Size
		rep.Tensors = append(rep.Tensors, infoTensor{Name: ti.Name, Type: ti.Type.String(), Shape: ti.Shape, Offset: ti.Offset, Size: ti.Size})
	}
	rep.TensorCount = len(rep.Tensors)
	types := make([]loader.Type, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		rep.Types = append(rep.Types, *byType[t])
	}
	return rep
}

// valueTypeName is "uint32", "string", "[]int32", "[][]float32".
func valueTypeName(v loader.Value) string {
	if v.Type() != loader.ValueArray {
		return v.Type().String()
	}
	if inner, ok := v.Any().([]loader.Value); ok && len(inner) > 0 {
		return "[]" + valueTypeName(inner[0])
	}
	return "[]" + v.ElemType().String()
}

// jsonValue converts a metadata value to something encoding/json writes
// faithfully: byte arrays as numbers (not base64), non-finite floats as
// the strings "NaN", "+Inf", "-Inf", nested arrays recursively.
func jsonValue(v loader.Value) any {
	switch x := v.Any().(type) {
	case float32:
		return jsonFloat(float64(x), x)
	case float64:
		return jsonFloat(x, x)
	case []uint8:
		out := make([]uint16, len(x))
		for i, b := range x {
			out[i] = uint16(b)
		}
		return out
	case []float32:
		return jsonFloats(x)
	case []float64:
		return jsonFloats(x)
	case []loader.Value:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	default:
		return x
	}
}

func jsonFloat[F float32 | float64](f float64, orig F) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return orig
}

func jsonFloats[F float32 | float64](x []F) any {
	for _, f := range x {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			out := make([]any, len(x))
			for i, f := range x {
				out[i] = jsonFloat(float64(f), f)
			}
			return out
		}
	}
	return x
}

func writeInfoJSON(w io.Writer, rep *infoReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeInfoTable(w io.Writer, rep *infoReport, listTensors bool) error {
	var b strings.Builder
	arch := rep.Architecture
	if arch == "" {
		arch = "(none)"
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "file:\t%s\n", printable(rep.Path))
	fmt.Fprintf(tw, "size:\t%d bytes (%s)\n", rep.Size, humanBytes(uint64(rep.Size)))
	fmt.Fprintf(tw, "gguf version:\t%d (alignment %d)\n", rep.Version, rep.Alignment)
	fmt.Fprintf(tw, "architecture:\t%s\n", printable(arch))
	if rep.Licence != "" {
		nc := ""
		if licence.NonCommercial(rep.Licence) {
			nc = " (non-commercial use only)"
		}
		fmt.Fprintf(tw, "licence:\t%s%s\n", printable(rep.Licence), nc)
	}
	if rep.Source != "" {
		fmt.Fprintf(tw, "source:\t%s\n", printable(rep.Source))
	}
	fmt.Fprintf(tw, "tensors:\t%d (%d bytes, %s)\n", rep.TensorCount, rep.TensorBytes, humanBytes(rep.TensorBytes))
	fmt.Fprintf(tw, "parameters:\t%d (%s)\n", rep.Parameters, humanCount(rep.Parameters))
	tw.Flush()

	fmt.Fprintf(&b, "\nmetadata (%d keys):\n", len(rep.Metadata))
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tTYPE\tVALUE")
	for i, m := range rep.Metadata {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", printable(m.Key), m.Type, rep.values[i].Short(maxTableElems))
	}
	tw.Flush()

	fmt.Fprintf(&b, "\ntensor types:\n")
	rows := [][]string{{"TYPE", "COUNT", "ELEMENTS", "BYTES", ""}}
	for _, g := range rep.Types {
		rows = append(rows, []string{g.Type, strconv.Itoa(g.Count), u64(g.Elements), u64(g.Bytes), humanBytes(g.Bytes)})
	}
	rows = append(rows, []string{"total", strconv.Itoa(rep.TensorCount), u64(rep.Parameters), u64(rep.TensorBytes), humanBytes(rep.TensorBytes)})
	writeColumns(&b, rows, []bool{false, true, true, true, true})

	if listTensors {
		fmt.Fprintf(&b, "\ntensors:\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tTYPE\tSHAPE\tBYTES\tOFFSET")
		for _, t := range rep.Tensors {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\n", printable(t.Name), t.Type, formatShape(t.Shape), t.Size, t.Offset)
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printable quotes s when it holds anything that could disturb a terminal
// or the table layout (control characters, tabs, invalid UTF-8).
func printable(s string) string {
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// writeColumns writes rows indented by two spaces, columns separated by two
// spaces, right-aligned where right[i] is set, without trailing blanks.
func writeColumns(b *strings.Builder, rows [][]string, right []bool) {
	widths := make([]int, len(right))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, row := range rows {
		var line strings.Builder
		line.WriteString("  ")
		for i, c := range row {
			if i > 0 {
				line.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-len(c))
			if right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func formatShape(shape []uint64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, suffix := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		f /= unit
		if f < unit {
			return fmt.Sprintf("%.1f %s", f, suffix)
		}
	}
	return fmt.Sprintf("%.1f EiB", f/unit)
}

func humanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f K", float64(n)/1e3)
	}
	return strconv.FormatUint(n, 10)
}
