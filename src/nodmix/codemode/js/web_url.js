// `URL` and `URLSearchParams` for code-mode guests (QuickJS lacks them): `URL` parses special and
// opaque schemes, resolves relative references and keeps `searchParams` in sync.
//
// Evaluated on a cell's first read of one of its globals; returns a builder per global (the guest
// setup turns each into a lazy global, built when first read; see habits.py). They follow the web
// specifications closely enough for programs that shape data but are not a conformance-tested
// implementation.
function () {
  'use strict';
  const builders = {};
  function lazy(name, build) { builders[name] = build; }

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
