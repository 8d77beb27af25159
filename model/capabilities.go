package model

// Capabilities say what a model answers: the unit of its depth and the
// outputs and inputs it has. Callers ask them of the model (Config.
// Capabilities, or a nested pair's own) instead of deriving them from the
// architecture.
type Capabilities struct {
	// Unit is the unit of Result.Depth without intrinsics; see UnitWith.
	Unit DepthUnit
	// NeedsIntrinsics: the depth is in metres only given the camera's
	// intrinsics (RunOptions.Intrinsics; DA3 metric-large), which other
	// models refuse.
	NeedsIntrinsics bool
	// MultiView: several images run as views of one scene, with attention
	// across them and cameras in one frame (DA3 any-view, the nested pair).
	MultiView bool
	// Camera: the model predicts each view's camera (Result.Camera).
	Camera bool
	// RayPose: the file carries the auxiliary ray head (RunOptions.RayPose).
	RayPose bool
	// GivenCameras: the file carries the camera encoder, so the model takes
	// known cameras (RunOptions.Extrinsics and ViewIntrinsics).
	GivenCameras bool
	// Confidence and Sky are the maps the model outputs besides depth.
	Confidence, Sky bool
	// Gaussians: the file carries the 3D Gaussian head (RunOptions.Gaussians).
	Gaussians bool
	// ExifRotate is whether the reference pipeline applies Exif orientation
	// to inputs (DA2's cv2.imread does; DA3's PIL pipeline does not).
	ExifRotate bool
	// Nested: the nested pair (any-view and metric branches).
	Nested bool
}

// UnitWith is the unit of the depth of a run with or without intrinsics.
func (c Capabilities) UnitWith(intrinsics bool) DepthUnit {
	if c.NeedsIntrinsics && intrinsics {
		return Metres
	}
	return c.Unit
}

// Capabilities are those of a model file with this configuration.
func (c Config) Capabilities() Capabilities {
	caps := Capabilities{Unit: Relative, ExifRotate: c.Arch == DA2}
	switch {
	case c.Arch == DA2 && c.Metric:
		caps.Unit = Metres
	case c.Arch == DA2:
		caps.Unit = Disparity
	case c.Arch == DA3Mono && c.Metric:
		caps.Unit, caps.NeedsIntrinsics = FocalNormalised, true
	}
	anyView := c.Arch == DA3 && !c.NestedMetric
	caps.MultiView = anyView
	caps.Camera = c.HasCamera
	caps.RayPose = anyView && c.Head.Aux
	caps.GivenCameras = anyView && c.CamEnc != nil
	caps.Confidence = c.Arch == DA3
	caps.Sky = c.Arch == DA3Mono
	caps.Gaussians = c.GS != nil
	return caps
}

// Capabilities are the model's (Config.Capabilities).
func (m *Model) Capabilities() Capabilities { return m.cfg.Capabilities() }
