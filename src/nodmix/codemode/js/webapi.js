// Web globals QuickJS lacks, for code-mode guests: `structuredClone`, `TextEncoder`,
// `TextDecoder`, `URL` and `URLSearchParams`.
//
// Evaluated on a cell's first use of one of them; returns a builder per global (the guest setup
// turns each into a lazy global, built when first read). They
// follow the web specifications closely enough for programs that shape data (UTF-8 only; `URL`
// parses special and opaque schemes, resolves relative references, keeps `searchParams` in sync)
// but are not a conformance-tested implementation.
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

  lazy('TextEncoder', function () {
    function encode(s) {
      s = s === undefined ? '' : String(s);
      const out = [];
      for (let i = 0; i < s.length; i++) {
        let c = s.charCodeAt(i);
        if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
          const d = s.charCodeAt(i + 1);
          if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
          else c = 0xfffd;
        } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
        if (c < 0x80) out.push(c);
        else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
        else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
        else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      }
      return new Uint8Array(out);
    }
    class TextEncoder {
      get encoding() { return 'utf-8'; }
      encode(s) { return encode(s); }
      encodeInto(s, dest) {
        const bytes = encode(s);
        const n = Math.min(bytes.length, dest.length);
        dest.set(bytes.subarray(0, n));
        return { read: String(s).length, written: n };
      }
    }
    return TextEncoder;
  });

  lazy('TextDecoder', function () {
    class TextDecoder {
      constructor(label, options) {
        const l = label === undefined ? 'utf-8' : String(label).trim().toLowerCase();
        if (l !== 'utf-8' && l !== 'utf8' && l !== 'unicode-1-1-utf-8') {
          throw new RangeError('The "' + label + '" encoding is not supported');
        }
        this.fatal = !!(options && options.fatal);
        this.ignoreBOM = !!(options && options.ignoreBOM);
      }
      get encoding() { return 'utf-8'; }
      decode(input) {
        if (input === undefined) return '';
        let b;
        if (input instanceof ArrayBuffer) b = new Uint8Array(input);
        else if (ArrayBuffer.isView(input)) b = new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
        else throw new TypeError('The "input" argument must be an ArrayBuffer or ArrayBufferView');
        const fatal = this.fatal;
        let s = '', i = 0;
        if (!this.ignoreBOM && b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) i = 3;
        const bad = function () {
          if (fatal) throw new TypeError('The encoded data was not valid for encoding utf-8');
          return 0xfffd;
        };
        const chunk = [];
        while (i < b.length) {
          const c = b[i++];
          let cp;
          if (c < 0x80) cp = c;
          else {
            const n = c >= 0xf0 && c <= 0xf4 ? 3 : c >= 0xe0 ? (c <= 0xef ? 2 : -1) : c >= 0xc2 ? 1 : -1;
            if (n < 0 || i + n > b.length) { cp = bad(); if (n > 0) i = b.length; }
            else {
              cp = n === 1 ? c & 31 : n === 2 ? c & 15 : c & 7;
              let ok = true;
              for (let k = 0; k < n; k++) {
                const d = b[i];
                if ((d & 0xc0) !== 0x80) { ok = false; break; }
                cp = (cp << 6) | (d & 63); i++;
              }
              if (!ok || (n === 2 && cp < 0x800) || (n === 3 && (cp < 0x10000 || cp > 0x10ffff))
                  || (cp >= 0xd800 && cp <= 0xdfff)) cp = bad();
            }
          }
          if (cp >= 0x10000) { cp -= 0x10000; chunk.push(0xd800 + (cp >> 10), 0xdc00 + (cp & 1023)); }
          else chunk.push(cp);
          if (chunk.length >= 4096) { s += String.fromCharCode.apply(null, chunk); chunk.length = 0; }
        }
        return s + String.fromCharCode.apply(null, chunk);
      }
    }
    return TextDecoder;
  });

  let searchParamsClass = null;
  function makeSearchParams() {
    if (searchParamsClass !== null) return searchParamsClass;
    const enc = function (s) {
      return encodeURIComponent(s).replace(/[!'()~]/g, function (c) {
        return '%' + c.charCodeAt(0).toString(16).toUpperCase();
      }).replace(/%20/g, '+');
    };
    const dec = function (s) {
      const t = s.replace(/\+/g, ' ');
      try { return decodeURIComponent(t); } catch (_) { return unescape(t); }
    };
    const LIST = Symbol('list'), OWNER = Symbol('owner');
    class URLSearchParams {
      constructor(init) {
        this[LIST] = [];
        this[OWNER] = null;
        if (init === undefined || init === null) return;
        if (typeof init === 'object' || typeof init === 'function') {
          if (typeof init[Symbol.iterator] === 'function') {
            for (const pair of init) {
              const p = Array.from(pair);
              if (p.length !== 2) throw new TypeError('Each query pair must be an iterable [name, value] tuple');
              this[LIST].push([String(p[0]), String(p[1])]);
            }
          } else {
            for (const k of Object.keys(init)) this[LIST].push([k, String(init[k])]);
          }
          return;
        }
        this._parse(String(init));
      }
      _parse(s) {
        if (s[0] === '?') s = s.slice(1);
        this[LIST] = [];
        for (const part of s.split('&')) {
          if (part === '') continue;
          const eq = part.indexOf('=');
          this[LIST].push(eq === -1 ? [dec(part), ''] : [dec(part.slice(0, eq)), dec(part.slice(eq + 1))]);
        }
      }
      _changed() { if (this[OWNER] !== null) this[OWNER]._setQuery(this.toString()); }
      get size() { return this[LIST].length; }
      append(k, v) { this[LIST].push([String(k), String(v)]); this._changed(); }
      delete(k, v) {
        k = String(k);
        this[LIST] = this[LIST].filter(function (p) { return !(p[0] === k && (v === undefined || p[1] === String(v))); });
        this._changed();
      }
      get(k) { k = String(k); const p = this[LIST].find(function (x) { return x[0] === k; }); return p ? p[1] : null; }
      getAll(k) { k = String(k); return this[LIST].filter(function (x) { return x[0] === k; }).map(function (x) { return x[1]; }); }
      has(k, v) { k = String(k); return this[LIST].some(function (x) { return x[0] === k && (v === undefined || x[1] === String(v)); }); }
      set(k, v) {
        k = String(k); v = String(v);
        const i = this[LIST].findIndex(function (x) { return x[0] === k; });
        if (i === -1) this[LIST].push([k, v]);
        else {
          this[LIST][i][1] = v;
          this[LIST] = this[LIST].filter(function (x, j) { return j <= i || x[0] !== k; });
        }
        this._changed();
      }
      sort() {
        this[LIST] = this[LIST].map(function (p, i) { return [p, i]; }).sort(function (a, b) {
          return a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1];
        }).map(function (x) { return x[0]; });
        this._changed();
      }
      forEach(fn, self) { for (const p of this[LIST].slice()) fn.call(self, p[1], p[0], this); }
      keys() { return this[LIST].map(function (p) { return p[0]; })[Symbol.iterator](); }
      values() { return this[LIST].map(function (p) { return p[1]; })[Symbol.iterator](); }
      entries() { return this[LIST].map(function (p) { return [p[0], p[1]]; })[Symbol.iterator](); }
      [Symbol.iterator]() { return this.entries(); }
      toString() { return this[LIST].map(function (p) { return enc(p[0]) + '=' + enc(p[1]); }).join('&'); }
      get [Symbol.toStringTag]() { return 'URLSearchParams'; }
    }
    URLSearchParams.OWNER = OWNER;
    searchParamsClass = URLSearchParams;
    return URLSearchParams;
  }
  lazy('URLSearchParams', makeSearchParams);

  lazy('URL', function () {
    const USP = makeSearchParams();
    const SPECIAL = { 'http:': '80', 'https:': '443', 'ws:': '80', 'wss:': '443', 'ftp:': '21', 'file:': '' };
    const F = Symbol('fields');
    const encPath = function (s) { return s.replace(/[ "<>`#?{}]/g, function (c) { return encodeURIComponent(c); }); };
    const encQuery = function (s) { return s.replace(/[ "<>#']/g, function (c) { return encodeURIComponent(c); }); };
    const encHash = function (s) { return s.replace(/[ "<>`]/g, function (c) { return encodeURIComponent(c); }); };
    function normPath(path) {
      const out = [];
      const segs = path.split('/');
      for (let i = 0; i < segs.length; i++) {
        const s = segs[i];
        const last = i === segs.length - 1;
        if (s === '..' || s.toLowerCase() === '%2e%2e') { if (out.length > 1) out.pop(); if (last) out.push(''); }
        else if (s === '.' || s.toLowerCase() === '%2e') { if (last) out.push(''); }
        else out.push(s);
      }
      let p = out.join('/');
      if (p[0] !== '/') p = '/' + p;
      return encPath(p);
    }
    function invalid(input) { return new TypeError('Invalid URL: ' + input); }
    function parseAuthority(f, rest, input) {
      // rest: after "//"; returns the remainder (path, query, hash)
      let end = rest.search(/[\/?#\\]/);
      if (end === -1) end = rest.length;
      let auth = rest.slice(0, end);
      const at = auth.lastIndexOf('@');
      f.username = ''; f.password = '';
      if (at !== -1) {
        const cred = auth.slice(0, at);
        auth = auth.slice(at + 1);
        const colon = cred.indexOf(':');
        f.username = colon === -1 ? cred : cred.slice(0, colon);
        f.password = colon === -1 ? '' : cred.slice(colon + 1);
      }
      let host = auth, port = '';
      const m = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(auth);
      if (!m) throw invalid(input);
      host = m[1]; port = m[2] || '';
      if (port !== '') { const n = +port; if (n > 65535) throw invalid(input); port = String(n); }
      if (SPECIAL[f.protocol] === port) port = '';
      if (host === '' && f.protocol !== 'file:' && SPECIAL[f.protocol] !== undefined) throw invalid(input);
      if (/[\s<>^|%]/.test(host) && host[0] !== '[') throw invalid(input);
      f.hostname = host.toLowerCase();
      f.port = port;
      return rest.slice(end);
    }
    function splitTail(f, tail) {
      let hash = '', query = '';
      const h = tail.indexOf('#');
      if (h !== -1) { hash = tail.slice(h); tail = tail.slice(0, h); }
      const q = tail.indexOf('?');
      if (q !== -1) { query = tail.slice(q); tail = tail.slice(0, q); }
      f.search = query.length > 1 ? encQuery(query) : '';
      f.hash = hash.length > 1 ? encHash(hash) : '';
      return tail;
    }
    function parse(input, base) {
      const s = String(input).replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '').replace(/[\t\n\r]/g, '');
      const f = { protocol: '', username: '', password: '', hostname: '', port: '', pathname: '', search: '', hash: '', opaque: false };
      const sm = /^([A-Za-z][A-Za-z0-9+.\-]*):/.exec(s);
      if (sm) {
        f.protocol = sm[1].toLowerCase() + ':';
        let rest = s.slice(sm[0].length);
        if (SPECIAL[f.protocol] !== undefined) {
          if (base && base.protocol === f.protocol && !/^[\/\\]/.test(rest)) return relative(base, rest, input);
          rest = rest.replace(/^[\/\\]*/, '');
          rest = parseAuthority(f, rest, input);
          f.pathname = normPath(splitTail(f, rest.replace(/\\/g, '/')));
        } else if (rest.slice(0, 2) === '//') {
          rest = parseAuthority(f, rest.slice(2), input);
          const p = splitTail(f, rest);
          f.pathname = p === '' ? '' : normPath(p);
        } else {
          f.opaque = true;
          f.pathname = splitTail(f, rest);
        }
        return f;
      }
      if (!base) throw invalid(input);
      return relative(base, s, input);
    }
    function relative(base, s, input) {
      const f = Object.assign({}, base);
      if (base.opaque) {
        if (s[0] !== '#') throw invalid(input);
        f.hash = s.length > 1 ? encHash(s) : '';
        return f;
      }
      const special = SPECIAL[f.protocol] !== undefined;
      if (/^[\/\\]{2}/.test(s) && (special || s.slice(0, 2) === '//')) return parse(f.protocol + s);
      if (s === '') { f.hash = ''; return f; }
      if (s[0] === '#') { f.hash = s.length > 1 ? encHash(s) : ''; return f; }
      if (s[0] === '?') { splitTail(f, s); return f; }
      const tail = splitTail(f, special ? s.replace(/\\/g, '/') : s);
      if (tail[0] === '/') f.pathname = normPath(tail);
      else {
        const dir = base.pathname.slice(0, base.pathname.lastIndexOf('/') + 1);
        f.pathname = normPath((dir || '/') + tail);
      }
      return f;
    }
    class URL {
      constructor(url, base) {
        let b = null;
        if (base !== undefined) b = base instanceof URL ? base[F] : parse(String(base), null);
        this[F] = parse(url instanceof URL ? url.href : String(url), b);
        const sp = new USP(this[F].search);
        sp[USP.OWNER] = this;
        this._sp = sp;
        Object.defineProperty(this, '_sp', { enumerable: false });
      }
      static canParse(url, base) { try { new URL(url, base); return true; } catch (_) { return false; } }
      static parse(url, base) { try { return new URL(url, base); } catch (_) { return null; } }
      _setQuery(q) { this[F].search = q === '' ? '' : '?' + q; }
      get protocol() { return this[F].protocol; }
      set protocol(v) { v = String(v).replace(/:.*$/, '').toLowerCase() + ':'; if ((SPECIAL[v] !== undefined) === (SPECIAL[this[F].protocol] !== undefined)) { this[F].protocol = v; if (SPECIAL[v] === this[F].port) this[F].port = ''; } }
      get username() { return this[F].username; }
      set username(v) { this[F].username = encodeURIComponent(String(v)); }
      get password() { return this[F].password; }
      set password(v) { this[F].password = encodeURIComponent(String(v)); }
      get hostname() { return this[F].hostname; }
      set hostname(v) { if (!this[F].opaque) this[F].hostname = String(v).toLowerCase(); }
      get port() { return this[F].port; }
      set port(v) { const s = String(v); if (s === '') { this[F].port = ''; return; } const n = parseInt(s, 10); if (n >= 0 && n <= 65535) this[F].port = SPECIAL[this[F].protocol] === String(n) ? '' : String(n); }
      get host() { return this[F].hostname + (this[F].port ? ':' + this[F].port : ''); }
      set host(v) { const m = /^([^:]*)(?::(\d*))?$/.exec(String(v)); if (m) { this.hostname = m[1]; if (m[2] !== undefined) this.port = m[2]; } }
      get origin() {
        const f = this[F];
        return SPECIAL[f.protocol] !== undefined && f.protocol !== 'file:' ? f.protocol + '//' + this.host : 'null';
      }
      get pathname() { return this[F].pathname; }
      set pathname(v) { if (!this[F].opaque) this[F].pathname = normPath(String(v)); }
      get search() { return this[F].search.length > 1 ? this[F].search : ''; }
      set search(v) { const s = String(v); this[F].search = s === '' || s === '?' ? '' : encQuery(s[0] === '?' ? s : '?' + s); this._sp._parse(this[F].search); }
      get searchParams() { return this._sp; }
      get hash() { return this[F].hash.length > 1 ? this[F].hash : ''; }
      set hash(v) { const s = String(v); this[F].hash = s === '' || s === '#' ? '' : encHash(s[0] === '#' ? s : '#' + s); }
      get href() {
        const f = this[F];
        if (f.opaque) return f.protocol + f.pathname + f.search + f.hash;
        const cred = f.username || f.password ? f.username + (f.password ? ':' + f.password : '') + '@' : '';
        const auth = f.hostname !== '' || SPECIAL[f.protocol] !== undefined ? '//' + cred + this.host : '';
        return f.protocol + auth + f.pathname + this.search + this.hash;
      }
      set href(v) { const u = new URL(v); this[F] = u[F]; this._sp._parse(this[F].search); }
      toString() { return this.href; }
      toJSON() { return this.href; }
      get [Symbol.toStringTag]() { return 'URL'; }
    }
    return URL;
  });
  return builders;
}
