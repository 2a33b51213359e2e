// `API.list()` and `API.read()` of code-mode guests, over the run's virtual API files. The
// guest setup evaluates it on the first call of either, so cells that never read their API
// files carry none of it; see guest.py.
function (cap) {
  'use strict';
  const files = cap.files, frozenCopy = cap.frozenCopy;
  const resolved = cap.resolved, rejected = cap.rejected, S = String, E = Error;
  function checkPath(path) {
    const p = S(path);
    const parts = p.split('/');
    for (const part of parts) {
      if (part === '' || part === '.' || part === '..') {
        throw new E('API paths are relative file paths like "mcp/index.d.ts"; "." and ".." '
          + 'segments are not allowed: ' + p);
      }
    }
    return p;
  }
  return {
    list: function (prefix) {
      const pre = prefix === undefined || prefix === null ? '' : S(prefix).replace(/\/+$/, '');
      const out = [];
      for (const f of files) {
        if (pre === '' || f.path === pre || f.path.startsWith(pre + '/')) {
          out.push({ path: f.path, description: f.description, bytes: f.bytes });
        }
      }
      return resolved(frozenCopy({ files: out }));
    },
    read: function (path) {
      try {
        const p = checkPath(path);
        for (const f of files) if (f.path === p) return resolved(frozenCopy(f));
        return rejected(new E('Unknown API file: ' + p + '. Use API.list() to see the files.'));
      } catch (e) { return rejected(e); }
    },
  };
}
