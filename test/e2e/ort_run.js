#!/usr/bin/env node
// ort_run.js - run an ONNX model through onnxruntime (CPU) and dump its outputs.
//
// Usage:
//   node ort_run.js MODEL.onnx IN_DIR OUT_DIR [--threads N] [--warmup N] [--repeat N]
//
// Finding onnxruntime-node: install it once, outside the repo, e.g.
//   mkdir -p /tmp/ort && cd /tmp/ort && npm init -y >/dev/null \
//     && npm install --ignore-scripts onnxruntime-node
// (--ignore-scripts: its CPU library ships inside the package; the install
// script would try to download CUDA bits and fails offline.)  Then point this
// script at it with NODE_PATH=/tmp/ort/node_modules, or with ORT_DIR=/tmp/ort
// (the directory holding node_modules/).  Without either, /tmp/ort is tried.
//
// Exchange format (little-endian raw tensors plus a JSON manifest):
//   IN_DIR/inputs.json   : [{"name": ..., "dtype": ..., "shape": [...], "file": "x.bin"}, ...]
//   IN_DIR/<file>        : the tensor's elements, row-major, raw little-endian bytes
//   OUT_DIR/outputs.json : same layout, one entry per model output (in model
//                          output order), written by this script, files out_<i>.bin
// dtype is one of: float32 float64 int8 uint8 int16 uint16 int32 int64 bool
// (bool: one byte per element, 0 or 1).
//
// Options: --threads N sets intraOpNumThreads (default 1; interOpNumThreads is
// always 1 and execution is sequential).  --warmup/--repeat (default 0/1) run
// the session several times; the per-run wall time of the timed runs is
// reported on stderr as JSON ({"runs_ms": [...], "median_ms": ...}) for
// benchmarking.  The outputs written are those of the last run.
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    const dirs = [process.env.ORT_DIR, '/tmp/ort'].filter(Boolean);
    for (const d of dirs) {
      try {
        const req = Module.createRequire(path.join(path.resolve(d), 'noop.js'));
        return req('onnxruntime-node');
      } catch (e2) { /* try next */ }
    }
    throw new Error('onnxruntime-node not found: set NODE_PATH=<dir>/node_modules or ORT_DIR=<dir>');
  }
}

const TYPED = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, int64: BigInt64Array,
  bool: Uint8Array,
};

function readTensor(ort, dir, ent) {
  const T = TYPED[ent.dtype];
  if (!T) throw new Error('unsupported dtype ' + ent.dtype);
  const buf = fs.readFileSync(path.join(dir, ent.file));
  const n = ent.shape.reduce((a, b) => a * b, 1);
  if (buf.length !== n * T.BYTES_PER_ELEMENT)
    throw new Error(`${ent.file}: ${buf.length} bytes, expected ${n * T.BYTES_PER_ELEMENT}`);
  // copy into an aligned buffer
  const ab = new ArrayBuffer(buf.length);
  new Uint8Array(ab).set(buf);
  return new ort.Tensor(ent.dtype, new T(ab), ent.shape);
}

function typeName(t) {
  // onnxruntime-node tensor.type names match ours for the supported set
  return t.type;
}

async function main() {
  const argv = process.argv.slice(2);
  const pos = [];
  const opt = { threads: 1, warmup: 0, repeat: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--threads') opt.threads = parseInt(argv[++i], 10);
    else if (a === '--warmup') opt.warmup = parseInt(argv[++i], 10);
    else if (a === '--repeat') opt.repeat = parseInt(argv[++i], 10);
    else pos.push(a);
  }
  if (pos.length !== 3) {
    console.error('usage: node ort_run.js MODEL.onnx IN_DIR OUT_DIR [--threads N] [--warmup N] [--repeat N]');
    process.exit(2);
  }
  const [modelPath, inDir, outDir] = pos;
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opt.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const manifest = JSON.parse(fs.readFileSync(path.join(inDir, 'inputs.json'), 'utf8'));
  const feeds = {};
  for (const ent of manifest) feeds[ent.name] = readTensor(ort, inDir, ent);

  let results;
  for (let i = 0; i < opt.warmup; i++) results = await session.run(feeds);
  const times = [];
  for (let i = 0; i < Math.max(1, opt.repeat); i++) {
    const t0 = process.hrtime.bigint();
    results = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }

  fs.mkdirSync(outDir, { recursive: true });
  const outs = [];
  session.outputNames.forEach((name, i) => {
    const t = results[name];
    const file = `out_${i}.bin`;
    const d = t.data;
    fs.writeFileSync(path.join(outDir, file), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    outs.push({ name, dtype: typeName(t), shape: Array.from(t.dims), file });
  });
  fs.writeFileSync(path.join(outDir, 'outputs.json'), JSON.stringify(outs, null, 1) + '\n');
  if (opt.repeat > 1 || opt.warmup > 0) {
    const s = times.slice().sort((a, b) => a - b);
    console.error(JSON.stringify({ runs_ms: times, median_ms: s[Math.floor(s.length / 2)] }));
  }
}

main().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
