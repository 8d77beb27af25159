// Browser test of da3-go serve's page, driven by the Go test TestPageInChromium
// (server/page_test.go): open the page in headless Chromium at 1400×1000,
// upload images, watch the progress indicator while the request runs, wait
// for the depth image and the 3D canvas, measure where the canvas lies, the
// colours of its points against the GLB's and the pixels the cameras add,
// and take a screenshot.
//
//   node pagetest.mjs URL SCREENSHOT.png IMAGE...
//
// Prints one JSON line with what it saw; exits non-zero on failure. With
// EXPECT_NO_VIEWER=1 the server does not have the viewer bundle: the page
// must show the depth and say the viewer is not bundled.
// CHROMIUM names the browser (default /usr/bin/chromium); playwright-core
// never downloads one.

import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [url, shot, ...images] = process.argv.slice(2);
if (!url || !shot || images.length === 0) {
  console.error('usage: node pagetest.mjs URL SCREENSHOT.png IMAGE...');
  process.exit(2);
}

const profile = mkdtempSync(join(tmpdir(), 'da3-page-'));
// A fresh profile (--user-data-dir) for every run.
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1400, height: 1000 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
});
let code = 0;
try {
  const page = browser.pages()[0] || await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(url);
  await page.waitForFunction(() => document.querySelectorAll('#model option').length > 0, null, { timeout: 30000 });
  const processRes = await page.inputValue('#process-res');
  // Another model's default follows the choice of model (GET /v1/models
  // lists da3-tiny, then da2-tiny).
  const models = await page.$$eval('#model option', (os) => os.map((o) => o.value));
  let otherRes = '';
  if (models.length > 1) {
    await page.selectOption('#model', models[1]);
    otherRes = await page.inputValue('#process-res');
    await page.selectOption('#model', models[0]);
  }
  // Record what the progress indicator shows while the request runs: a
  // request to the tiny model can end before a poll would see it.
  await page.evaluate(() => {
    const seen = { shown: false, run_disabled: false, elapsed: [] };
    window.__progress = seen;
    const look = () => {
      if (document.querySelector('#progress').hidden) return;
      seen.shown = true;
      seen.run_disabled = seen.run_disabled || document.querySelector('#run').disabled;
      const t = document.querySelector('#elapsed').textContent;
      if (seen.elapsed[seen.elapsed.length - 1] !== t) seen.elapsed.push(t);
    };
    new MutationObserver(look).observe(document.querySelector('#input'), { subtree: true, attributes: true, childList: true, characterData: true });
  });
  await page.setInputFiles('#files', images);
  await page.waitForFunction(() => {
    const img = document.querySelector('#views img.depth');
    return img && img.complete && img.naturalWidth > 0;
  }, null, { timeout: 60000 });
  if (process.env.EXPECT_NO_VIEWER === '1') {
    await page.waitForSelector('#viewer-missing', { state: 'visible', timeout: 60000 });
    const seen = await page.evaluate(() => ({
      missing: document.querySelector('#viewer-missing').textContent,
      viewer_hidden: document.querySelector('#viewer').hidden,
      hints_hidden: document.querySelector('#viewer-hints').hidden,
      views: document.querySelectorAll('#views .view').length,
      downloads: [...document.querySelectorAll('#links a')].map((a) => a.download),
    }));
    await page.screenshot({ path: shot, fullPage: true });
    seen.errors = errors.filter((e) => !e.includes('404'));
    seen.process_res = processRes;
    seen.other_process_res = otherRes;
    console.log(JSON.stringify(seen));
    process.exitCode = 0;
    throw 'done';
  }
  await page.waitForSelector('#viewer[data-ready="1"] canvas', { timeout: 60000 });
  // Let the canvas settle, then read it back: with the cameras hidden, the
  // mean colour of the pixels the points cover (against the GLB's mean
  // point colour); with them shown, the pixels they add.
  await page.waitForTimeout(500);
  const cameras = async (on) => {
    await page.setChecked('#show-cameras', on);
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
    return page.evaluate(readCanvas, on);
  };
  const bare = await cameras(false);
  const withCams = await cameras(true);
  const seen = await page.evaluate(async () => {
    const rect = (sel) => {
      const r = document.querySelector(sel).getBoundingClientRect();
      return { top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, left: r.left, right: r.right };
    };
    const depth = document.querySelector('#views img.depth');
    const glb = [...document.querySelectorAll('#links a')].find((a) => a.download === 'scene.glb');
    const hints = document.querySelector('#viewer-hints');
    return {
      depth_width: depth.naturalWidth,
      depth_height: depth.naturalHeight,
      views: document.querySelectorAll('#views .view').length,
      points: Number(document.querySelector('#viewer').dataset.points),
      cameras: Number(document.querySelector('#viewer').dataset.cameras),
      canvas_box: rect('#viewer canvas'),
      depth_box: rect('#views img.depth'),
      hints: hints && !hints.hidden ? hints.textContent : '',
      glb_mean: glb ? await glbPointMean(await (await fetch(glb.href)).arrayBuffer()) : null,
      downloads: [...document.querySelectorAll('#links a')].map((a) => a.download),
      status: document.querySelector('#status').textContent,
    };

    // glbPointMean is the mean RGB (0–255) of the COLOR_0 bytes of the mesh
    // named "points" (normalised uint8 RGBA, as da3-go writes it).
    function glbPointMean(buf) {
      const dv = new DataView(buf);
      const jsonLen = dv.getUint32(12, true);
      const doc = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 20, jsonLen)));
      const bin = 20 + jsonLen + 8;
      const prim = doc.meshes.find((m) => m.name === 'points').primitives[0];
      const acc = doc.accessors[prim.attributes.COLOR_0];
      const view = doc.bufferViews[acc.bufferView];
      const bytes = new Uint8Array(buf, bin + (view.byteOffset || 0) + (acc.byteOffset || 0), acc.count * 4);
      const sum = [0, 0, 0];
      for (let i = 0; i < acc.count; i++) for (let k = 0; k < 3; k++) sum[k] += bytes[4 * i + k];
      return sum.map((v) => v / acc.count);
    }
  });
  Object.assign(seen, {
    process_res: processRes,
    other_process_res: otherRes,
    progress: await page.evaluate(() => window.__progress),
    canvas_width: bare.width,
    canvas_height: bare.height,
    canvas_colours: withCams.colours,
    point_mean: bare.mean,
    point_pixels: bare.covered,
    camera_pixels: withCams.changed,
  });
  await page.screenshot({ path: shot, fullPage: true });
  seen.errors = errors;
  console.log(JSON.stringify(seen));
} catch (e) {
  if (e !== 'done') {
    console.error(String(e));
    code = 1;
  }
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);

// readCanvas runs in the page: it copies the 3D canvas and returns its size,
// how many distinct colours it has, the mean RGB of the pixels that points
// cover fully (those that differ from the background, as do their four
// neighbours: an edge pixel is part background) and, with the cameras shown,
// how many pixels differ from the last reading without them.
function readCanvas(withCameras) {
  const src = document.querySelector('#viewer canvas');
  const c = document.createElement('canvas');
  c.width = src.width;
  c.height = src.height;
  const g = c.getContext('2d');
  g.drawImage(src, 0, 0);
  const px = g.getImageData(0, 0, c.width, c.height).data;
  const colours = new Set();
  for (let i = 0; i < px.length; i += 4) colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
  const bg = [px[0], px[1], px[2]]; // a corner: the clear colour
  const w = c.width;
  const h = c.height;
  const isBg = (x, y) => {
    const i = 4 * (y * w + x);
    return Math.abs(px[i] - bg[0]) + Math.abs(px[i + 1] - bg[1]) + Math.abs(px[i + 2] - bg[2]) <= 6;
  };
  const sum = [0, 0, 0];
  let covered = 0;
  for (let y = 1; y < h - 1; y++) {
    for (let x = 1; x < w - 1; x++) {
      if (isBg(x, y) || isBg(x - 1, y) || isBg(x + 1, y) || isBg(x, y - 1) || isBg(x, y + 1)) continue;
      const i = 4 * (y * w + x);
      for (let k = 0; k < 3; k++) sum[k] += px[i + k];
      covered++;
    }
  }
  let changed = 0;
  const before = window.__withoutCameras;
  if (withCameras && before && before.length === px.length) {
    for (let i = 0; i < px.length; i += 4) {
      if (Math.abs(px[i] - before[i]) + Math.abs(px[i + 1] - before[i + 1]) + Math.abs(px[i + 2] - before[i + 2]) > 24) changed++;
    }
  }
  if (!withCameras) window.__withoutCameras = px;
  return { width: w, height: h, colours: colours.size, covered, mean: covered > 0 ? sum.map((v) => v / covered) : null, changed };
}
