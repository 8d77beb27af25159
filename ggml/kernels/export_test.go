package kernels

// The kernels' parts that only their tests call directly.
var (
	Peak               = peak
	PackedShape        = packedShape
	WinogradTile       = chooseWinogradTile
	WinogradFits       = winogradFits
	Conv2DWinograd     = conv2DWinograd
	Conv2DWinogradTile = conv2DWinogradTile
	GEMMPacked         = gemmPacked
	GEMMPackedFits     = gemmPackedFits
	PackedFor          = packedFor
	OpGEMM             = opGEMM
	PointwiseFew       = pointwiseFew
)
