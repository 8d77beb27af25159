package server

// maxTileSize bounds tile_size: the largest image side the server takes.
const maxTileSize = 1 << 14

// tiling reports whether the request asks for tiles (on or auto).
func (q *DepthRequest) tiling() bool { return q.Tile == "on" || q.Tile == "auto" }

// validateTile checks tile and tile_size and what tiling cannot go with.
func (p *parsed) validateTile(m ModelInfo) *apiError {
	q := &p.req
	switch q.Tile {
	case "", "off", "on", "auto":
	default:
		return badRequest("tile %q: want on, auto or off", q.Tile)
	}
	if q.TileSize < 0 || q.TileSize > maxTileSize {
		return badRequest("tile_size %d out of range (0..%d, 0 for automatic)", q.TileSize, maxTileSize)
	}
	if !q.tiling() {
		return nil
	}
	switch {
	case m.MultiView && len(p.images) > 1 && !q.Independent:
		return badRequest("tile runs each image alone, not as views of one scene: set independent (or send one image)")
	case q.ProcessedSize:
		return badRequest("tile returns maps at the image size: drop processed_size")
	case q.IncludePoints || len(q.Exports) > 0:
		return badRequest("tile gives maps only: drop include_points and exports (point clouds and scene files come from runs without tiles)")
	case len(q.Cameras) > 0:
		return badRequest("tile with cameras: known cameras condition one scene, tiles run each crop alone")
	case q.CameraModel != "":
		return badRequest("tile with camera_model: tiles of the undistorted view are not supported; undistort the image first, or drop tile")
	}
	return nil
}

// tileMerge is the merge buffers of a tiled w×h image with maps full-size
// maps (4 bytes a pixel each), the global pass's small maps aside.
func tileMerge(w, h, maps int) int64 { return int64(maps) * 4 * int64(w) * int64(h) }
