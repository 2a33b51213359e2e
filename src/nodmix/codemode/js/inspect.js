// A small `util.inspect` for console output (Node's formatting of values and %-specifiers),
// loaded by the console on the first value that is not a string or a number; see habits.py.
function () {
  'use strict';
  const S = String, isArray = Array.isArray, keys = Object.keys, getProto = Object.getPrototypeOf;
  const ident = /^[A-Za-z_$][\w$]*$/;
  const objectProto = Object.prototype;
  function quote(s) {
    const q = s.indexOf("'") === -1 ? "'" : (s.indexOf('"') === -1 ? '"' : '`');
    return q + s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n') + q;
  }
  function key(k) { return typeof k === 'symbol' ? '[' + S(k) + ']' : (ident.test(k) ? k : quote(k)); }
  function errorText(e) {
    let name = 'Error', message = '';
    try { name = S(e.name); message = S(e.message); } catch (_) { /* keep defaults */ }
    return message ? name + ': ' + message : name;
  }
  function ctorName(v) {
    try {
      const p = getProto(v);
      if (p === null) return null;
      const c = p.constructor;
      return typeof c === 'function' && typeof c.name === 'string' ? c.name : '';
    } catch (_) { return ''; }
  }
  function wrap(open, parts, close, indent) {
    // Node's rule: one line when the entries, their separators and the indentation fit in 80.
    if (parts.length === 0) return open + close;
    let total = parts.length * 3 + indent.length + open.length + 10;
    for (const p of parts) total += p.length;
    const flat = open + ' ' + parts.join(', ') + ' ' + close;
    if (total <= 80 && flat.indexOf('\n') === -1) return flat;
    const pad = '\n' + indent + '  ';
    return open + pad + parts.join(',' + pad) + '\n' + indent + close;
  }
  function inspect(v, depth, seen, indent) {
    switch (typeof v) {
      case 'string': return depth === 0 ? v : quote(v);
      case 'number': return v === 0 && 1 / v < 0 ? '-0' : S(v);
      case 'bigint': return S(v) + 'n';
      case 'undefined': return 'undefined';
      case 'boolean': return S(v);
      case 'symbol': return S(v);
      case 'function': {
        const n = v.name ? S(v.name) : '';
        let cls = false;
        try { cls = /^class\b/.test(Function.prototype.toString.call(v)); } catch (_) { /**/ }
        return cls ? '[class ' + (n || '(anonymous)') + ']'
          : '[Function' + (n ? ': ' + n : ' (anonymous)') + ']';
      }
    }
    if (v === null) return 'null';
    if (v instanceof Error) return depth === 0 ? errorText(v) : '[' + errorText(v) + ']';
    if (v instanceof Date) return isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString();
    if (v instanceof RegExp) return S(v);
    if (v instanceof Promise) return 'Promise { <unknown> }';
    if (seen.indexOf(v) !== -1) return '[Circular]';
    const inner = indent + '  ';
    const name = ctorName(v);
    if (isArray(v) || ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      if (depth > 2) return '[Array]';
      seen.push(v);
      const parts = [];
      const n = Math.min(v.length, 100);
      for (let i = 0; i < n; i++) {
        parts.push(i in v ? inspect(v[i], depth + 1, seen, inner) : '<empty item>');
      }
      if (v.length > 100) parts.push('... ' + (v.length - 100) + ' more items');
      if (isArray(v)) {
        for (const k of keys(v)) if (!(/^\d+$/.test(k))) parts.push(key(k) + ': ' + inspect(v[k], depth + 1, seen, inner));
      }
      seen.pop();
      const prefix = isArray(v) ? (name === 'Array' ? '' : name + '(' + v.length + ') ')
        : name + '(' + v.length + ') ';
      return prefix + wrap('[', parts, ']', indent);
    }
    if (v instanceof Map || v instanceof Set) {
      const isMap = v instanceof Map;
      const label = (isMap ? 'Map' : 'Set') + '(' + v.size + ')';
      if (depth > 2) return '[' + (isMap ? 'Map' : 'Set') + ']';
      seen.push(v);
      const parts = [];
      for (const e of v) {
        parts.push(isMap ? inspect(e[0], depth + 1, seen, inner) + ' => '
          + inspect(e[1], depth + 1, seen, inner) : inspect(e, depth + 1, seen, inner));
        if (parts.length >= 100) { parts.push('...'); break; }
      }
      seen.pop();
      return label + ' ' + wrap('{', parts, '}', indent);
    }
    if (depth > 2) return name && name !== 'Object' ? '[' + name + ']' : '[Object]';
    seen.push(v);
    const parts = [];
    let ks = [];
    try { ks = keys(v); } catch (_) { /**/ }
    for (const k of ks) {
      let item;
      try { item = inspect(v[k], depth + 1, seen, inner); } catch (e) { item = '[Getter threw]'; }
      parts.push(key(k) + ': ' + item);
      if (parts.length >= 200) { parts.push('...'); break; }
    }
    seen.pop();
    const prefix = name === null ? '[Object: null prototype] '
      : (name && name !== 'Object' ? name + ' ' : '');
    return prefix + wrap('{', parts, '}', indent);
  }
  function plain(args) {
    // The common case, strings and numbers without %-specifiers, without the inspector.
    let out = '';
    for (let i = 0; i < args.length; i++) {
      const a = args[i], t = typeof a;
      const s = t === 'string' ? a : (t === 'number' && (a !== 0 || 1 / a > 0)) || t === 'boolean'
        ? '' + a : inspect(a, 0, [], '');
      out = i === 0 ? s : out + ' ' + s;
    }
    return out;
  }
  function format(args) {
    let out = '';
    let start = 0;
    const first = args[0];
    if (!(typeof first === 'string' && args.length > 1 && first.indexOf('%') !== -1)) {
      return plain(args);
    }
    if (typeof first === 'string' && args.length > 1 && first.indexOf('%') !== -1) {
      let i = 1;
      out = first.replace(/%([sdifjoOc%])/g, function (m, c) {
        if (c === '%') return '%';
        if (i >= args.length) return m;
        const a = args[i++];
        switch (c) {
          case 's': return typeof a === 'string' ? a : inspect(a, 1, [], '');
          case 'd': case 'i': {
            if (typeof a === 'bigint') return S(a) + 'n';
            const n = Number(a);
            return S(c === 'i' ? Math.trunc(n) : n);
          }
          case 'f': return S(parseFloat(a));
          case 'j': try { return JSON.stringify(a); } catch (_) { return '[Circular]'; }
          case 'c': return '';
          default: return inspect(a, 1, [], '');
        }
      });
      start = i;
    } else if (args.length > 0) {
      out = inspect(first, 0, [], '');
      start = 1;
    }
    for (let i = start; i < args.length; i++) out += ' ' + inspect(args[i], 0, [], '');
    return out;
  }
  return { format: format, inspect: inspect };
}
