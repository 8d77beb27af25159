// The 3D viewer of da3-go serve's page: shows the scene's GLB export (the
// point cloud and the camera frusta, as da3-go reconstruct writes it) with
// three.js and orbit controls. `npm run build` bundles it (with three.js)
// into ../static/viewer.js, which the Go binary embeds; the page imports it
// only when it is there.
//
// The GLB is in glTF axes (y up, the first camera looking down −z) and
// centred on the points' median, as the official exporter aligns it.

import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
import { GLTFLoader } from 'three/addons/loaders/GLTFLoader.js';

// createViewer draws into container; show(glb) replaces the scene with the
// GLB file in glb (an ArrayBuffer) and resolves to the number of points.
export function createViewer(container) {
  const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.setClearColor(0x16181d);
  container.appendChild(renderer.domElement);
  const view = new THREE.PerspectiveCamera(55, 1, 0.001, 1000);
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

  async function show(glb) {
    const gltf = await new GLTFLoader().parseAsync(glb, '');
    world = new THREE.Scene();
    world.add(gltf.scene);
    gltf.scene.updateMatrixWorld(true);

    // Frame the bulk of the points: the 90th percentile of their distance
    // to the median (the origin), so that stray points do not shrink them.
    let n = 0;
    let eye = new THREE.Vector3(0, 0, 1);
    const dist = [];
    const p = new THREE.Vector3();
    gltf.scene.traverse((o) => {
      const pos = o.geometry && o.geometry.getAttribute('position');
      if (!pos) return;
      if (o.isPoints) {
        n += pos.count;
        const step = Math.max(1, Math.floor(pos.count / 20000));
        for (let i = 0; i < pos.count; i += step) dist.push(p.fromBufferAttribute(pos, i).applyMatrix4(o.matrixWorld).length());
      } else if (o.name === 'camera_0' || (o.parent && o.parent.name === 'camera_0')) {
        eye = p.fromBufferAttribute(pos, 0).applyMatrix4(o.matrixWorld).clone(); // the first camera's centre
      }
    });
    dist.sort((a, b) => a - b);
    const radius = Math.max(dist.length > 0 ? dist[Math.floor(0.9 * (dist.length - 1))] : 1, 1e-3);
    gltf.scene.traverse((o) => {
      if (o.isPoints) {
        o.material.size = 2;
        o.material.sizeAttenuation = false;
      }
    });

    // From behind the first camera, a little above and to the side, far
    // enough that the framed sphere fills the view.
    const dir = eye.lengthSq() > 1e-12 ? eye.clone().normalize() : new THREE.Vector3(0, 0, 1);
    dir.add(new THREE.Vector3(0.3, 0.3, 0)).normalize();
    view.position.copy(dir.multiplyScalar((1.2 * radius) / Math.sin((view.fov * Math.PI) / 360)));
    view.near = radius / 1000;
    view.far = radius * 100;
    controls.target.set(0, 0, 0);
    controls.update();
    resize();
    container.dataset.points = String(n);
    container.dataset.ready = '1';
    return n;
  }

  function dispose() {
    observer.disconnect();
    controls.dispose();
    renderer.dispose();
    renderer.domElement.remove();
  }
  return { show, dispose, canvas: renderer.domElement };
}
