// da3-go serve's page: upload images to POST /v1/depth, show the colourised
// depth and confidence next to each image, the scene in 3D (when the viewer
// bundle is built in), and download links for every output.

const $ = (id) => document.getElementById(id);
let models = [];
let files = [];
let viewer = null;
let inFlight = null; // the AbortController of the running request
let resEdited = false; // the process res field was changed by hand

const status = (text, isError = false) => {
  $('status').textContent = text;
  $('status').className = isError ? 'error' : '';
};

async function loadModels() {
  try {
    const r = await fetch('/v1/models');
    models = (await r.json()).data;
  } catch (e) {
    status(`cannot list the models: ${e}`, true);
    return;
  }
  for (const m of models) {
    const o = document.createElement('option');
    o.value = m.id;
    o.textContent = `${m.id} (${m.arch}${m.nested ? ', nested' : ''}, ${m.unit})`;
    $('model').append(o);
  }
  const chosen = () => {
    $('intrinsics-field').hidden = !model().intrinsics;
    if (!resEdited) showDefaultRes();
  };
  $('model').addEventListener('change', chosen);
  chosen();
  status('Ready: drop one image, or several views of one scene.');
}

const model = () => models.find((m) => m.id === $('model').value) || models[0];

// showDefaultRes puts the model's default processed resolution in the form
// (GET /v1/models says it; an empty field means the default too).
function showDefaultRes() {
  const m = model();
  $('process-res').value = m && m.process_res > 0 ? String(m.process_res) : '';
}

// progress shows a spinner and the seconds since start while a request runs;
// progress(null) hides it.
let ticker = null;
function progress(start) {
  clearInterval(ticker);
  ticker = null;
  $('progress').hidden = start === null;
  $('run').disabled = start !== null || files.length === 0;
  $('input').setAttribute('aria-busy', String(start !== null));
  if (start === null) return;
  const tick = () => { $('elapsed').textContent = `${((performance.now() - start) / 1000).toFixed(1)} s`; };
  tick();
  ticker = setInterval(tick, 100);
}

function setFiles(list) {
  files = [...list].filter((f) => f.type.startsWith('image/') || /\.(jpe?g|png|bmp|tiff?|webp|gif)$/i.test(f.name));
  $('run').disabled = files.length === 0 || inFlight !== null;
  if (files.length > 0) run();
}

const b64bytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

function link(name, blob) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.textContent = name;
  $('links').append(a);
}

async function run() {
  const m = model();
  if (!m || files.length === 0) return;
  const form = new FormData();
  files.forEach((f) => form.append('image', f, f.name));
  form.append('model', m.id);
  form.append('process_res', $('process-res').value || '0');
  form.append('process_res_method', $('method').value);
  form.append('independent', $('independent').checked);
  form.append('map_formats', 'f32,npy,png,png16');
  form.append('include_depth', 'true');
  form.append('include_confidence', m.confidence);
  form.append('include_sky', m.sky);
  form.append('include_pose', m.camera);
  form.append('points_conf_thresh', $('conf-thresh').value || '0');
  if (m.exports.length > 0) form.append('exports', m.exports.join(','));
  if (m.intrinsics && $('intrinsics').value.trim() !== '') form.append('intrinsics', $('intrinsics').value.trim());
  // A new run (new files dropped) cancels the one in flight: the server
  // stops a request whose client went away.
  if (inFlight) inFlight.abort();
  const ctl = new AbortController();
  inFlight = ctl;
  progress(performance.now());
  status(`Running ${m.id} on ${files.length} image(s)…`);
  let resp;
  try {
    const r = await fetch('/v1/depth', { method: 'POST', body: form, signal: ctl.signal });
    resp = await r.json();
    if (!r.ok) throw new Error(resp.error ? `${resp.error.code} ${resp.error.type}: ${resp.error.message}` : r.statusText);
  } catch (e) {
    if (inFlight !== ctl) return; // replaced by a newer run
    inFlight = null;
    progress(null);
    status(String(e.message || e), true);
    return;
  }
  if (inFlight !== ctl) return;
  inFlight = null;
  progress(null);
  const t = resp.timing_ms;
  status(`${resp.views.length} view(s), ${resp.views[0].width}×${resp.views[0].height}: model ${t.run.toFixed(0)} ms, total ${t.total.toFixed(0)} ms (queue ${t.queue.toFixed(0)} ms).`);
  showMaps(resp);
  showDownloads(resp);
  await showScene(resp, m);
}

function figure(src, caption, cls) {
  const f = document.createElement('figure');
  const img = document.createElement('img');
  img.src = src;
  img.className = cls;
  img.alt = caption;
  const c = document.createElement('figcaption');
  c.textContent = caption;
  f.append(img, c);
  return f;
}

function showMaps(resp) {
  const views = $('views');
  views.replaceChildren();
  resp.views.forEach((v, i) => {
    const row = document.createElement('div');
    row.className = 'view';
    row.append(figure(URL.createObjectURL(files[i]), files[i].name, 'input'));
    if (v.depth) row.append(figure(`data:image/png;base64,${v.depth.png}`, `depth, ${resp.unit} (${v.width}×${v.height}, near = warm)`, 'depth'));
    if (v.confidence) row.append(figure(`data:image/png;base64,${v.confidence.png}`, 'confidence', 'conf'));
    else if (v.sky) row.append(figure(`data:image/png;base64,${v.sky.png}`, 'sky', 'sky'));
    views.append(row);
  });
  $('results').hidden = false;
}

function showDownloads(resp) {
  $('links').replaceChildren();
  resp.views.forEach((v, i) => {
    const base = files[i].name.replace(/\.[^.]+$/, '');
    for (const [kind, map] of [['depth', v.depth], ['confidence', v.confidence], ['sky', v.sky]]) {
      if (!map) continue;
      link(`${base}_${kind}.npy`, new Blob([b64bytes(map.npy)], { type: 'application/octet-stream' }));
      link(`${base}_${kind}.png`, new Blob([b64bytes(map.png)], { type: 'image/png' }));
      link(`${base}_${kind}_16.png`, new Blob([b64bytes(map.png16)], { type: 'image/png' }));
      link(`${base}_${kind}.f32`, new Blob([b64bytes(map.f32)], { type: 'application/octet-stream' }));
    }
  });
  const cams = resp.views.filter((v) => v.extrinsics).map((v, i) => ({
    image: files[i].name, width: v.width, height: v.height, processed_width: v.processed_width, processed_height: v.processed_height,
    extrinsics: v.extrinsics, intrinsics: v.intrinsics, intrinsics_original: v.intrinsics_original,
  }));
  if (cams.length > 0) link('cameras.json', new Blob([JSON.stringify({ convention: 'world-to-camera [R|t], OpenCV axes; intrinsics in pixels', views: cams }, null, 2)], { type: 'application/json' }));
  for (const [name, e] of Object.entries(resp.exports || {})) link(e.filename || `scene.${name}`, new Blob([b64bytes(e.data)], { type: e.media_type }));
  link('response.json', new Blob([JSON.stringify(resp)], { type: 'application/json' }));
  $('downloads').hidden = false;
}

// viewerShown shows the 3D viewer with its controls and hints, or in its
// place text (the page's own sentence when text is empty: the viewer is not
// bundled).
let notBundled = '';
function viewerShown(on, text = '') {
  for (const id of ['viewer', 'viewer-hints', 'viewer-controls']) $(id).hidden = !on;
  $('viewer-missing').hidden = on;
  if (!on) $('viewer-missing').textContent = text || notBundled;
}

async function showScene(resp, m) {
  $('scene').hidden = false;
  const glb = resp.exports && resp.exports.glb;
  if (!glb) {
    viewerShown(false, `The 3D scene needs a model with a camera head (a DA3 any-view model); ${m.id} has none.`);
    return;
  }
  let mod;
  try {
    mod = await import('/static/viewer.js');
  } catch (e) {
    viewerShown(false);
    return;
  }
  viewerShown(true);
  if (!viewer) viewer = mod.createViewer($('viewer'));
  try {
    await viewer.show(b64bytes(glb.data).buffer);
    viewer.showCameras($('show-cameras').checked);
  } catch (e) {
    viewerShown(false, `Cannot show the scene: ${e}`);
  }
}

function init() {
  notBundled = $('viewer-missing').textContent;
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => { e.preventDefault(); drop.classList.remove('over'); setFiles(e.dataTransfer.files); });
  $('files').addEventListener('change', (e) => setFiles(e.target.files));
  $('run').addEventListener('click', run);
  $('process-res').addEventListener('input', () => { resEdited = $('process-res').value !== ''; });
  $('show-cameras').addEventListener('change', () => { if (viewer) viewer.showCameras($('show-cameras').checked); });
  $('reset-view').addEventListener('click', () => { if (viewer) viewer.reset(); });
  loadModels();
}

init();
