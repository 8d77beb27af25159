package gs

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/da3-go/da3-go/internal/tmath"
)

// plyProperties are the vertex properties of the package's gs_ply file, in
// order (gsply_helpers.construct_list_of_attributes without f_rest).
var plyProperties = []string{
	"x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
	"scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3",
}

// PLYHeader is the header of a gs_ply file of n Gaussians, byte for byte as
// the plyfile package writes it.
func PLYHeader(n int) string {
	h := "ply\nformat binary_little_endian 1.0\nelement vertex " + fmt.Sprint(n) + "\n"
	for _, p := range plyProperties {
		h += "property float " + p + "\n"
	}
	return h + "end_header\n"
}

// Selection is which Gaussians gs_ply keeps (export_to_gs_ply's defaults):
// per view, a border of int(8/256·H) rows and int(8/256·W) columns is
// dropped, and so are Gaussians whose depth (g.Depth) is above the view's
// 0.9 quantile (torch.quantile). Upstream slices the border with [t:-t],
// which keeps nothing when t is 0 (images under 32 pixels): here a border
// of 0 keeps every row or column.
func Selection(g *Gaussians) []bool {
	depth := g.Depth
	n := g.Height * g.Width
	keep := make([]bool, g.Views*n)
	th := int(8.0 / 256 * float64(g.Height))
	tw := int(8.0 / 256 * float64(g.Width))
	for v := 0; v < g.Views; v++ {
		d := depth[v*n : (v+1)*n]
		q := tmath.Quantile(d, 0.9)
		for i := 0; i < n; i++ {
			r, c := i/g.Width, i%g.Width
			keep[v*n+i] = r >= th && r < g.Height-th && c >= tw && c < g.Width-tw && d[i] <= q
		}
	}
	return keep
}

// WritePLY writes the Gaussians as the package's gs_ply (export_to_gs_ply:
// save_gaussian_ply with the DC coefficients only, opacities as
// log(x/(1−x)), scales as logs, dummy zero normals), binary little-endian,
// keeping the Gaussians Selection keeps, in view, row, column order.
func WritePLY(w io.Writer, g *Gaussians) error {
	n := g.Views * g.Height * g.Width
	if len(g.Depth) != n || len(g.Means) != 3*n || len(g.Scales) != 3*n || len(g.Rotations) != 4*n ||
		len(g.Harmonics) != 3*g.SHDim*n || len(g.Opacities) != n || g.SHDim < 1 {
		return fmt.Errorf("gs_ply: inconsistent Gaussians (%d views of %dx%d)", g.Views, g.Width, g.Height)
	}
	keep := Selection(g)
	n = 0
	for _, k := range keep {
		if k {
			n++
		}
	}
	bw := bufio.NewWriter(w)
	if _, err := io.WriteString(bw, PLYHeader(n)); err != nil {
		return err
	}
	rec := make([]float32, len(plyProperties))
	buf := make([]byte, 4*len(rec))
	for i, k := range keep {
		if !k {
			continue
		}
		copy(rec[0:3], g.Means[3*i:3*i+3])
		rec[3], rec[4], rec[5] = 0, 0, 0
		for c := 0; c < 3; c++ {
			rec[6+c] = g.Harmonics[(3*i+c)*g.SHDim]
		}
		op := g.Opacities[i]
		rec[9] = float32(math.Log(float64(op / (1 - op))))
		for a := 0; a < 3; a++ {
			rec[10+a] = float32(math.Log(float64(g.Scales[3*i+a])))
		}
		copy(rec[13:17], g.Rotations[4*i:4*i+4])
		for j, v := range rec {
			binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
