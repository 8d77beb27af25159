// The 3D viewer of da3-go serve's page: the scene's point cloud and its
// cameras (frusta) with three.js, orbit controls around the points. `npm run
// build` bundles it (with three.js) into ../static/viewer.js, which the Go
// binary embeds; the page imports it only when it is there.
//
// Input coordinates are OpenCV's (x right, y down, z forward), as the server
// returns them; three.js looks down −z with y up, so points are shown as
// (x, −y, −z).

import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';

const toThree = (x, y, z) => new THREE.Vector3(x, -y, -z);

// camera centre and the four image corners at distance s, in world OpenCV
// coordinates: world = Rᵀ(cam − t) for world-to-camera [R | t].
function frustum(extrinsics, intrinsics, width, height, s) {
  const R = extrinsics.map((row) => row.slice(0, 3));
  const t = extrinsics.map((row) => row[3]);
  const world = (c) => [0, 1, 2].map((j) => R[0][j] * (c[0] - t[0]) + R[1][j] * (c[1] - t[1]) + R[2][j] * (c[2] - t[2]));
  const [fx, fy, cx, cy] = [intrinsics[0][0], intrinsics[1][1], intrinsics[0][2], intrinsics[1][2]];
  const corner = (u, v) => world([((u - cx) / fx) * s, ((v - cy) / fy) * s, s]);
  return {
    centre: world([0, 0, 0]),
    corners: [corner(0, 0), corner(width, 0), corner(width, height), corner(0, height)],
  };
}

// createViewer draws into container; show(scene) replaces what is shown.
// scene: {points: Float32Array xyz, colors: Uint8Array rgb,
//         cameras: [{extrinsics: 3×4, intrinsics: 3×3, width, height}]}
// (intrinsics for an image of width×height pixels).
export function createViewer(container) {
  const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.setClearColor(0x16181d);
  container.appendChild(renderer.domElement);
  const view = new THREE.PerspectiveCamera(60, 1, 0.001, 1000);
  const controls = new OrbitControls(view, renderer.domElement);
  let world = new THREE.Scene();
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

  function show(scene) {
    world = new THREE.Scene();
    const n = scene.points.length / 3;
    const pos = new Float32Array(3 * n);
    for (let i = 0; i < n; i++) {
      const p = toThree(scene.points[3 * i], scene.points[3 * i + 1], scene.points[3 * i + 2]);
      pos[3 * i] = p.x;
      pos[3 * i + 1] = p.y;
      pos[3 * i + 2] = p.z;
    }
    const geometry = new THREE.BufferGeometry();
    geometry.setAttribute('position', new THREE.BufferAttribute(pos, 3));
    geometry.setAttribute('color', new THREE.BufferAttribute(scene.colors, 3, true));
    // Frame the bulk of the points: the median centre and the 90th
    // percentile distance, so that a few stray points do not shrink the view.
    const median = (k) => {
      const v = Float32Array.from({ length: n }, (_, i) => pos[3 * i + k]).sort();
      return n > 0 ? v[n >> 1] : 0;
    };
    const centre = new THREE.Vector3(median(0), median(1), median(2));
    const dist = Float32Array.from({ length: n }, (_, i) => Math.hypot(pos[3 * i] - centre.x, pos[3 * i + 1] - centre.y, pos[3 * i + 2] - centre.z)).sort();
    const radius = Math.max(n > 0 ? dist[Math.floor(0.9 * (n - 1))] : 1, 1e-3);
    const size = ((2 * radius) / Math.sqrt(Math.max(n, 1))) * 0.8;
    world.add(new THREE.Points(geometry, new THREE.PointsMaterial({ size, vertexColors: true, sizeAttenuation: true })));

    const cams = scene.cameras || [];
    cams.forEach((c, i) => {
      const f = frustum(c.extrinsics, c.intrinsics, c.width, c.height, 0.25 * radius);
      const C = toThree(...f.centre);
      const K = f.corners.map((k) => toThree(...k));
      const segs = [];
      for (let j = 0; j < 4; j++) segs.push(C, K[j], K[j], K[(j + 1) % 4]);
      const colour = new THREE.Color().setHSL(i / Math.max(cams.length, 1), 0.9, 0.6);
      world.add(new THREE.LineSegments(new THREE.BufferGeometry().setFromPoints(segs), new THREE.LineBasicMaterial({ color: colour })));
    });

    // Look at the points from the side of the first camera, a little above,
    // from where the framed sphere fills the view.
    let dir = new THREE.Vector3(0, 0, 1);
    if (cams.length > 0) {
      const f = frustum(cams[0].extrinsics, cams[0].intrinsics, cams[0].width, cams[0].height, 1);
      const away = toThree(...f.centre).sub(centre);
      if (away.lengthSq() > 1e-12) dir = away.normalize();
    }
    dir.add(new THREE.Vector3(0.35, 0.35, 0)).normalize();
    const eye = centre.clone().add(dir.multiplyScalar(1.9 * radius / Math.sin((view.fov * Math.PI) / 360)));
    view.near = radius / 1000;
    view.far = radius * 100;
    controls.target.copy(centre);
    controls.update();
    resize();
    container.dataset.points = String(n);
    container.dataset.ready = '1';
  }

  function dispose() {
    observer.disconnect();
    controls.dispose();
    renderer.dispose();
    renderer.domElement.remove();
  }
  return { show, dispose, canvas: renderer.domElement };
}
