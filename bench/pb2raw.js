#!/usr/bin/env node
// pb2raw.js - convert an ONNX test-data directory (input_N.pb, serialized
// onnx.TensorProto) into the raw exchange format that test/e2e/ort_run.js reads:
// OUT_DIR/inputs.json ([{"name","dtype","shape","file"}]) plus one raw
// little-endian file per tensor.
//
// Usage: node pb2raw.js IN_DIR OUT_DIR
//
// A minimal protobuf reader (no dependencies): TensorProto fields dims (1),
// data_type (2), float_data (4), int32_data (5), int64_data (7), name (8),
// raw_data (9) and double_data (10).  Enough for the fixtures' inputs, which
// numpy_helper writes with raw_data; the typed repeated fields are accepted too.
'use strict';
const fs = require('fs');
const path = require('path');

// onnx.TensorProto.DataType -> [dtype name for ort_run.js, bytes per element]
const DTYPE = {
  1: ['float32', 4], 2: ['uint8', 1], 3: ['int8', 1], 4: ['uint16', 2],
  5: ['int16', 2], 6: ['int32', 4], 7: ['int64', 8], 9: ['bool', 1], 11: ['float64', 8],
};

function decodeTensor(buf) {
  let pos = 0;
  function varint() {
    let v = 0n, shift = 0n, b;
    do {
      if (pos >= buf.length) throw new Error('truncated varint');
      b = buf[pos++];
      v |= BigInt(b & 0x7f) << shift;
      shift += 7n;
    } while (b & 0x80);
    return v;
  }
  const t = { dims: [], type: 0, name: '', raw: null, f32: [], i32: [], i64: [], f64: [] };
  while (pos < buf.length) {
    const key = Number(varint());
    const field = key >>> 3, wire = key & 7;
    if (wire === 0) {
      const v = varint();
      if (field === 1) t.dims.push(Number(BigInt.asIntN(64, v)));
      else if (field === 2) t.type = Number(v);
      else if (field === 5) t.i32.push(Number(BigInt.asIntN(32, v)));
      else if (field === 7) t.i64.push(BigInt.asIntN(64, v));
    } else if (wire === 2) {
      const len = Number(varint());
      const body = buf.subarray(pos, pos + len);
      pos += len;
      if (field === 8) t.name = body.toString('utf8');
      else if (field === 9) t.raw = Buffer.from(body);
      else if (field === 1 || field === 5 || field === 7) { // packed varints
        let p = 0;
        while (p < body.length) {
          let v = 0n, shift = 0n, b;
          do { b = body[p++]; v |= BigInt(b & 0x7f) << shift; shift += 7n; } while (b & 0x80);
          if (field === 1) t.dims.push(Number(BigInt.asIntN(64, v)));
          else if (field === 5) t.i32.push(Number(BigInt.asIntN(32, v)));
          else t.i64.push(BigInt.asIntN(64, v));
        }
      } else if (field === 4) {
        for (let p = 0; p + 4 <= body.length; p += 4) t.f32.push(body.readFloatLE(p));
      } else if (field === 10) {
        for (let p = 0; p + 8 <= body.length; p += 8) t.f64.push(body.readDoubleLE(p));
      }
    } else if (wire === 5) {
      if (field === 4) t.f32.push(buf.readFloatLE(pos));
      pos += 4;
    } else if (wire === 1) {
      if (field === 10) t.f64.push(buf.readDoubleLE(pos));
      pos += 8;
    } else {
      throw new Error('unsupported wire type ' + wire);
    }
  }
  return t;
}

function toRaw(t) {
  const d = DTYPE[t.type];
  if (!d) throw new Error(`tensor '${t.name}': unsupported data_type ${t.type}`);
  const n = t.dims.reduce((a, b) => a * b, 1);
  let raw = t.raw;
  if (!raw) {
    raw = Buffer.alloc(n * d[1]);
    for (let i = 0; i < n; i++) {
      switch (d[0]) {
        case 'float32': raw.writeFloatLE(t.f32[i], i * 4); break;
        case 'float64': raw.writeDoubleLE(t.f64[i], i * 8); break;
        case 'int64': raw.writeBigInt64LE(t.i64[i], i * 8); break;
        case 'int32': raw.writeInt32LE(t.i32[i], i * 4); break;
        default: raw.writeIntLE(t.i32[i], i * d[1], d[1]); break;
      }
    }
  }
  if (raw.length !== n * d[1])
    throw new Error(`tensor '${t.name}': ${raw.length} bytes, expected ${n * d[1]}`);
  return { dtype: d[0], raw };
}

function main() {
  const [inDir, outDir] = process.argv.slice(2);
  if (!inDir || !outDir) {
    console.error('usage: node pb2raw.js IN_DIR OUT_DIR');
    process.exit(2);
  }
  const files = fs.readdirSync(inDir).filter((f) => /^input_\d+\.pb$/.test(f))
    .sort((a, b) => parseInt(a.slice(6), 10) - parseInt(b.slice(6), 10));
  if (!files.length) throw new Error(`${inDir}: no input_N.pb`);
  fs.mkdirSync(outDir, { recursive: true });
  const manifest = files.map((f, i) => {
    const t = decodeTensor(fs.readFileSync(path.join(inDir, f)));
    const { dtype, raw } = toRaw(t);
    const file = `in_${i}.bin`;
    fs.writeFileSync(path.join(outDir, file), raw);
    return { name: t.name, dtype, shape: t.dims, file };
  });
  fs.writeFileSync(path.join(outDir, 'inputs.json'), JSON.stringify(manifest, null, 1) + '\n');
}

try { main(); } catch (e) { console.error('pb2raw: ' + (e && e.message || e)); process.exit(1); }
