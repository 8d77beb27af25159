// The 3D viewer of da3-go serve's page: shows the scene's GLB export (the
// point cloud and the camera frusta, as da3-go reconstruct writes it) with
// three.js and orbit controls. `npm run build` bundles it (with three.js)
// into ../static/viewer.js, which the Go binary embeds; the page imports it
// only when it is there.
//
// The GLB is in glTF axes (y up, the first camera looking down −z) and
// centred on the points' median, as the official exporter aligns it.
//
// Colours: the GLB's COLOR_0 bytes are the images' sRGB values (as the
// official exporter writes them), while glTF, and so three.js's GLTFLoader,
// takes vertex colours as linear. They are turned into linear values here, so
// that the renderer's sRGB output gives back each point's own colour.

import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
import { GLTFLoader } from 'three/addons/loaders/GLTFLoader.js';

// FRUSTUM_SIZE is the cameras' pyramid depth as a fraction of the scene's
// radius (the GLB draws them at 3 % of the scene's size: too small to see
// among the points); FRUSTUM_COLOUR contrasts with the dark background and
// with most photographs.
const FRUSTUM_SIZE = 0.18;
const FRUSTUM_COLOUR = 0xffd400;
const BACKGROUND = 0x16181d;

// srgbToLinear maps a byte of an sRGB colour to its linear value.
const srgbToLinear = (() => {
  const lut = new Float32Array(256);
  const c = new THREE.Color();
  for (let i = 0; i < 256; i++) lut[i] = c.setRGB(i / 255, i / 255, i / 255, THREE.SRGBColorSpace).r;
  return lut;
})();

// linearColours replaces geometry's colour attribute (the GLB's sRGB bytes,
// normalised) by float linear RGB.
function linearColours(geometry) {
  const col = geometry.getAttribute('color');
  if (!col) return;
  const out = new Float32Array(col.count * 3);
  for (let i = 0; i < col.count; i++) {
    for (let k = 0; k < 3; k++) {
      const v = col.getComponent(i, k); // normalised: in [0, 1]
      out[3 * i + k] = srgbToLinear[Math.round(Math.min(Math.max(v, 0), 1) * 255)];
    }
  }
  geometry.setAttribute('color', new THREE.BufferAttribute(out, 3));
}

// cameraOf reads a camera mesh of the GLB (8 segments: the centre to the
// four image corners, then the four edges) as its centre and corners in
// world coordinates, or null.
function cameraOf(o) {
  const pos = o.geometry.getAttribute('position');
  if (!pos || pos.count < 8) return null;
  const at = (i) => new THREE.Vector3().fromBufferAttribute(pos, i).applyMatrix4(o.matrixWorld);
  return { centre: at(0), corners: [at(1), at(3), at(5), at(7)] };
}

// frusta draws the cameras as pyramids of depth size, on top of the points.
function frusta(cameras, size) {
  const group = new THREE.Group();
  group.name = 'frusta';
  const lines = [];
  const faces = [];
  for (const { centre, corners } of cameras) {
    const mean = corners.reduce((s, c) => s + c.distanceTo(centre), 0) / 4;
    const k = mean > 0 ? size / mean : 1;
    const cs = corners.map((c) => c.clone().sub(centre).multiplyScalar(k).add(centre));
    for (let i = 0; i < 4; i++) lines.push(centre, cs[i], cs[i], cs[(i + 1) % 4]);
    faces.push(cs[0], cs[1], cs[2], cs[0], cs[2], cs[3]);
  }
  const flat = (vs) => new THREE.Float32BufferAttribute(vs.flatMap((v) => [v.x, v.y, v.z]), 3);
  const over = { color: FRUSTUM_COLOUR, depthTest: false, depthWrite: false, transparent: true };
  const edges = new THREE.BufferGeometry().setAttribute('position', flat(lines));
  const seg = new THREE.LineSegments(edges, new THREE.LineBasicMaterial(over));
  seg.renderOrder = 2;
  const planes = new THREE.BufferGeometry().setAttribute('position', flat(faces));
  const fill = new THREE.Mesh(planes, new THREE.MeshBasicMaterial({ ...over, opacity: 0.25, side: THREE.DoubleSide }));
  fill.renderOrder = 1;
  group.add(fill, seg);
  return group;
}

// createViewer draws into container; show(glb) replaces the scene with the
// GLB file in glb (an ArrayBuffer) and resolves to the number of points.
// showCameras(on) shows or hides the camera frusta; reset() goes back to the
// first view of the scene (as does a double click).
export function createViewer(container) {
  const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
  renderer.outputColorSpace = THREE.SRGBColorSpace;
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.setClearColor(BACKGROUND);
  container.appendChild(renderer.domElement);
  const view = new THREE.PerspectiveCamera(55, 1, 0.001, 1000);
  const controls = new OrbitControls(view, renderer.domElement);
  let world = new THREE.Scene();
  let cams = null;
  const home = { position: new THREE.Vector3(0, 0, 1), target: new THREE.Vector3() };
  const render = () => renderer.render(world, view);
  controls.addEventListener('change', render);
  const resize = () => {
    const w = container.clientWidth || 640;
    const h = container.clientHeight || 420;
    renderer.setSize(w, h);
    view.aspect = w / h;
    view.updateProjectionMatrix();
    render();
  };
  const observer = new ResizeObserver(resize);
  observer.observe(container);

  function reset() {
    view.position.copy(home.position);
    controls.target.copy(home.target);
    controls.update();
    render();
  }
  renderer.domElement.addEventListener('dblclick', reset);

  function showCameras(on) {
    if (cams) cams.visible = on;
    render();
  }

  async function show(glb) {
    const gltf = await new GLTFLoader().parseAsync(glb, '');
    const visible = cams ? cams.visible : true;
    world = new THREE.Scene();
    world.add(gltf.scene);
    gltf.scene.updateMatrixWorld(true);

    // Frame the bulk of the points: the 90th percentile of their distance
    // to the median (the origin), so that stray points do not shrink them.
    let n = 0;
    const cameras = [];
    const dist = [];
    const p = new THREE.Vector3();
    gltf.scene.traverse((o) => {
      const pos = o.geometry && o.geometry.getAttribute('position');
      if (!pos) return;
      if (o.isPoints) {
        n += pos.count;
        linearColours(o.geometry);
        o.material.size = 2;
        o.material.sizeAttenuation = false;
        const step = Math.max(1, Math.floor(pos.count / 20000));
        for (let i = 0; i < pos.count; i += step) dist.push(p.fromBufferAttribute(pos, i).applyMatrix4(o.matrixWorld).length());
      } else if (o.isLineSegments && [o.name, o.parent && o.parent.name].some((name) => /^camera_\d+$/.test(name || ''))) {
        const c = cameraOf(o);
        if (c) cameras.push(c);
        o.visible = false; // drawn again below, larger and on top
      }
    });
    dist.sort((a, b) => a - b);
    const radius = Math.max(dist.length > 0 ? dist[Math.floor(0.9 * (dist.length - 1))] : 1, 1e-3);
    const size = FRUSTUM_SIZE * radius;
    cams = frusta(cameras, size);
    cams.visible = visible;
    world.add(cams);

    // From behind the first camera, a little above and to the side, far
    // enough that the framed sphere, and the cameras, fill the view.
    const eye = cameras.length > 0 ? cameras[0].centre : new THREE.Vector3(0, 0, 1);
    const reach = cameras.reduce((r, c) => Math.max(r, c.centre.length() + size), radius);
    const dir = eye.lengthSq() > 1e-12 ? eye.clone().normalize() : new THREE.Vector3(0, 0, 1);
    dir.add(new THREE.Vector3(0.3, 0.3, 0)).normalize();
    home.position.copy(dir.multiplyScalar((1.1 * reach) / Math.sin((view.fov * Math.PI) / 360)));
    home.target.set(0, 0, 0);
    view.near = reach / 1000;
    view.far = reach * 100;
    reset();
    resize();
    container.dataset.points = String(n);
    container.dataset.cameras = String(cameras.length);
    container.dataset.ready = '1';
    return n;
  }

  function dispose() {
    observer.disconnect();
    controls.dispose();
    renderer.dispose();
    renderer.domElement.remove();
  }
  return { show, showCameras, reset, dispose, canvas: renderer.domElement };
}
