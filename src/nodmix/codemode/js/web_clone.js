// `structuredClone` for code-mode guests (QuickJS lacks it).
//
// Evaluated on a cell's first read of one of its globals; returns a builder per global (the guest
// setup turns each into a lazy global, built when first read; see habits.py). They follow the web
// specifications closely enough for programs that shape data but are not a conformance-tested
// implementation.
function () {
  'use strict';
  const builders = {};
  function lazy(name, build) { builders[name] = build; }

  lazy('structuredClone', function () {
    function fail(what) {
      return new DOMException(what + ' could not be cloned.', 'DataCloneError');
    }
    function clone(v, seen) {
      if (v === null || (typeof v !== 'object' && typeof v !== 'function')) {
        if (typeof v === 'symbol') throw fail(String(v));
        return v;
      }
      if (typeof v === 'function') throw fail(String(v).slice(0, 60));
      if (seen.has(v)) return seen.get(v);
      let out;
      if (Array.isArray(v)) {
        out = new Array(v.length); seen.set(v, out);
        for (const k of Object.keys(v)) out[k] = clone(v[k], seen);
        return out;
      }
      if (v instanceof Date) { out = new Date(v.getTime()); seen.set(v, out); return out; }
      if (v instanceof RegExp) { out = new RegExp(v.source, v.flags); seen.set(v, out); return out; }
      if (v instanceof Map) {
        out = new Map(); seen.set(v, out);
        for (const e of v) out.set(clone(e[0], seen), clone(e[1], seen));
        return out;
      }
      if (v instanceof Set) {
        out = new Set(); seen.set(v, out);
        for (const e of v) out.add(clone(e, seen));
        return out;
      }
      if (v instanceof ArrayBuffer) { out = v.slice(0); seen.set(v, out); return out; }
      if (ArrayBuffer.isView(v)) {
        const buf = clone(v.buffer, seen);
        const C = v.constructor;
        out = v instanceof DataView ? new DataView(buf, v.byteOffset, v.byteLength)
          : new C(buf, v.byteOffset, v.length);
        seen.set(v, out);
        return out;
      }
      if (v instanceof Error) {
        const E = { EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError }[v.name] || Error;
        out = new E(v.message); seen.set(v, out);
        if (typeof v.stack === 'string') out.stack = v.stack;
        return out;
      }
      if (v instanceof Promise || v instanceof WeakMap || v instanceof WeakSet) throw fail('#<' + v.constructor.name + '>');
      out = {}; seen.set(v, out);
      for (const k of Object.keys(v)) out[k] = clone(v[k], seen);
      return out;
    }
    return function structuredClone(value) {
      if (arguments.length === 0) throw new TypeError("structuredClone: 1 argument required, but only 0 present.");
      return clone(value, new Map());
    };
  });
  return builders;
}
