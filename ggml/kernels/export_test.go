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
	SetAVX2Int8Form    = setAVX2Int8Form
)

// The forms of the avx2 variant's int8c step.
type AVX2Int8Form = avx2Int8Form

const (
	AVX2Int8Auto    = avx2Int8Auto
	AVX2Int8Maddubs = avx2Int8Maddubs
	AVX2Int8VNNI512 = avx2Int8VNNI512
	AVX2Int8AVXVNNI = avx2Int8AVXVNNI
)
