// Browser test of da3-go serve's page, driven by the Go test TestPageInChromium
// (server/page_test.go): open the page in headless Chromium, upload images,
// wait for the depth image and the 3D canvas, check the canvas is drawn, and
// take a screenshot.
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
  viewport: { width: 1200, height: 1300 },
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
      views: document.querySelectorAll('#views .view').length,
      downloads: [...document.querySelectorAll('#links a')].map((a) => a.download),
    }));
    await page.screenshot({ path: shot, fullPage: true });
    seen.errors = errors.filter((e) => !e.includes('404'));
    console.log(JSON.stringify(seen));
    process.exitCode = 0;
    throw 'done';
  }
  await page.waitForSelector('#viewer[data-ready="1"] canvas', { timeout: 60000 });
  // Let the canvas settle, then read it back: a drawn scene has many colours.
  await page.waitForTimeout(500);
  const seen = await page.evaluate(() => {
    const src = document.querySelector('#viewer canvas');
    const c = document.createElement('canvas');
    c.width = src.width;
    c.height = src.height;
    const g = c.getContext('2d');
    g.drawImage(src, 0, 0);
    const px = g.getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    for (let i = 0; i < px.length; i += 4) colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
    const depth = document.querySelector('#views img.depth');
    return {
      depth_width: depth.naturalWidth,
      depth_height: depth.naturalHeight,
      views: document.querySelectorAll('#views .view').length,
      points: Number(document.querySelector('#viewer').dataset.points),
      canvas_width: c.width,
      canvas_height: c.height,
      canvas_colours: colours.size,
      downloads: [...document.querySelectorAll('#links a')].map((a) => a.download),
      status: document.querySelector('#status').textContent,
    };
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
