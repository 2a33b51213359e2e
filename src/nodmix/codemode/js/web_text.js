// `TextEncoder` and `TextDecoder` for code-mode guests (UTF-8 only; QuickJS lacks them).
//
// Evaluated on a cell's first read of one of its globals; returns a builder per global (the guest
// setup turns each into a lazy global, built when first read; see habits.py). They follow the web
// specifications closely enough for programs that shape data but are not a conformance-tested
// implementation.
function () {
  'use strict';
  const builders = {};
  function lazy(name, build) { builders[name] = build; }

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
  return builders;
}
