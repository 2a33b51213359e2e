"""The guest API installed in every code-mode VM: `ALL_TOOLS`, `tools`, `API`, `text`, `json`,
`yield_control`, plus `MCP` and plugin namespaces when the run can see them, and the globals
programs written for Node or browsers expect (`console`, timers, `sleep`, `URL`..., `habits.py`).

It is the sandbox "setup script": a function expression that receives the sandbox's private
capability (`call`, `request`, `requestJson`...) and closes over it, so guest code can never
reach the bridge.
Boot data (the compact catalog, safe names, virtual API files, namespace descriptors) comes from
one synchronous `call("boot")`; everything then lives in the VM heap and survives snapshots.
Intrinsics are captured before user code runs, so a guest that replaces `JSON` or `Promise`
cannot change how the bridge behaves.
"""

from __future__ import annotations

import json

from nodmix.codemode.habits import HABIT_GLOBALS, WEB_GLOBALS
from nodmix.sandbox.prelude import MAX_VALUE_DEPTH

HABIT_NAMES = json.dumps(list(HABIT_GLOBALS))
WEB_NAMES = json.dumps(list(WEB_GLOBALS))

SETUP_SCRIPT = (
    r"""
function (cap) {
  const rawCall = cap.call, rawRequest = cap.request, tooDeep = cap.tooDeep;
  // `stringify` refuses values that nest deeper than the sandbox allows (a RangeError).
  const parse = JSON.parse, stringify = cap.stringify, S = String, E = Error, RE = RangeError;
  // Console batches are arrays of strings: the plain serializer is enough and cheaper.
  const plainStringify = JSON.stringify;
  const freeze = Object.freeze, define = Object.defineProperty, create = Object.create;
  const keys = Object.keys, isArray = Array.isArray, resolved = Promise.resolve.bind(Promise);
  const rejected = Promise.reject.bind(Promise), defer = queueMicrotask;
  // Once the console is loaded, it sends its batched lines before any other crossing.
  let flushHook = null;
  const call = function (op, payload) {
    if (flushHook !== null) flushHook();
    return rawCall(op, payload);
  };
  const request = function (op, payload) {
    if (flushHook !== null) flushHook();
    return rawRequest(op, payload);
  };
  const rawRequestJson = cap.requestJson;
  const requestJson = function (op, json) {
    if (flushHook !== null) flushHook();
    return rawRequestJson(op, json);
  };
  const boot = parse(call('boot', ''));

  function safe(v) {
    if (v === undefined) return null;
    try {
      const s = stringify(v);
      return s === undefined ? S(v) : parse(s);
    } catch (e) {
      if (e instanceof RE && e.message === tooDeep) throw e;
      if (v instanceof E) return { name: S(v.name), message: S(v.message) };
      try { return S(v); } catch (_) { return '[unserializable value]'; }
    }
  }
  // `stringify(safe(v))`, serializing `v` only once.
  function safeJson(v) {
    if (v === undefined) return 'null';
    try {
      const s = stringify(v);
      return s === undefined ? plainStringify(S(v)) : s;
    } catch (e) {
      if (e instanceof RE && e.message === tooDeep) throw e;
      if (v instanceof E) return plainStringify({ name: S(v.name), message: S(v.message) });
      try { return plainStringify(S(v)); } catch (_) { return '"[unserializable value]"'; }
    }
  }
  function frozenCopy(v) {
    if (v === null || typeof v !== 'object') return v;
    const out = isArray(v) ? [] : {};
    for (const k of keys(v)) out[k] = frozenCopy(v[k]);
    return freeze(out);
  }
  function lift(p) {
    // A bridge promise settles with parsed JSON; errors are plain guest Errors.
    return p;
  }

  const callTool = function (ref, input) {
    const id = S(ref);
    const json = input === undefined ? '{}' : safeJson(input);
    // The payload nests one level deeper than the input: only a text this long can reach the
    // depth limit, so only then is the payload serialized (and checked) as a whole.
    if (json.length >= """
    + str(2 * MAX_VALUE_DEPTH)
    + r""") {
      return lift(request('call', { ref: id, input: parse(json) }));
    }
    return lift(requestJson('call', '{"ref":' + plainStringify(id) + ',"input":' + json + '}'));
  };
  const tools = create(null);
  tools.search = function (query, options) {
    const limit = options !== null && typeof options === 'object' && options.limit !== undefined
      ? options.limit : null;
    return lift(request('search', { query: query === undefined ? '' : S(query), limit: limit }));
  };
  tools.describe = function (id) { return lift(request('describe', { ref: S(id) })); };
  tools.call = callTool;
  for (const name of keys(boot.safe)) {
    const id = boot.safe[name];
    tools[name] = function (input) { return callTool(id, input); };
  }

  const files = boot.files;
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
  const API = freeze({
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
  });

  function makeNamespace(node, path) {
    if (node === null || typeof node !== 'object') return node;
    if (node.$fn !== undefined) {
      const fnPath = node.$fn;
      const fn = function () {
        const args = [];
        for (let i = 0; i < arguments.length; i++) args.push(safe(arguments[i]));
        return lift(request('ns', { path: fnPath, args: args }));
      };
      return freeze(fn);
    }
    if (isArray(node)) return freeze(node.map(function (v) { return makeNamespace(v, path); }));
    const out = create(null);
    for (const k of keys(node)) out[k] = makeNamespace(node[k], path + '.' + k);
    return freeze(out);
  }
  const namespaces = create(null);
  for (const name of keys(boot.namespaces)) {
    namespaces[name] = makeNamespace(boot.namespaces[name], name);
  }

  function mcpServer(ident, node, info) {
    const out = create(null);
    for (const k of keys(node)) out[k] = makeNamespace(node[k], 'MCP.' + ident + '.' + k);
    out.$api = function (toolName, options) {
      const wantSchema = options !== null && typeof options === 'object' && options.schema === true;
      let tools = info.tools, scope = 'server', header = info.header;
      if (toolName !== undefined && toolName !== null) {
        const t = S(toolName);
        tools = info.tools.filter(function (x) {
          return x.method === t || x.path.join('.') === t || x.mcpTool === t;
        });
        if (tools.length === 0) {
          return rejected(new E('Unknown MCP tool ' + t + ' on server ' + ident
            + '; call MCP.' + ident + '.$api() to list its tools.'));
        }
        if (tools.length === 1) {
          scope = 'tool';
          header = info.toolHeaders[tools[0].path.join('.')];
        }
      }
      const out2 = { kind: 'mcp_api', scope: scope, server: info.server, header: header,
                     tools: tools, note: info.note };
      if (wantSchema) {
        const schemas = {};
        for (const x of tools) schemas[x.path.join('.')] = info.schemas[x.path.join('.')];
        out2.schemas = schemas;
      }
      return resolved(frozenCopy(out2));
    };
    return freeze(out);
  }
  if (boot.mcp) {
    const api = boot.mcp.api;
    const root = create(null);
    root.$api = function () {
      return resolved(frozenCopy({ kind: 'mcp_api', scope: 'root', header: api.$root.header,
                                   servers: api.$root.servers, note: api.$root.note }));
    };
    for (const ident of keys(boot.mcp.descriptor)) {
      root[ident] = mcpServer(ident, boot.mcp.descriptor[ident], api[ident]);
    }
    namespaces.MCP = freeze(root);
  }

  const g = globalThis;
  const put = function (name, value) {
    define(g, name, { value: value, enumerable: false, configurable: false, writable: false });
  };
  put('ALL_TOOLS', frozenCopy(boot.tools));
  put('tools', freeze(tools));
  put('API', API);
  put('namespaces', freeze(namespaces));
  for (const name of keys(namespaces)) put(name, namespaces[name]);
  put('text', function (v) {
    const s = typeof v === 'string' ? v : stringify(safe(v));
    call('text', s === undefined ? S(v) : s);
  });
  put('json', function (v) { call('json', stringify(safe(v))); });
  put('yield_control', function (reason) {
    return lift(request('yield', { reason: reason === undefined ? null : S(reason) }));
  });
  // Node and web globals, built on first read (see habits.py).
  let habits = null, web = null;
  function fromHabits(name) {
    if (habits === null) {
      habits = call('source', 'habits')({ call: call, request: request, rawCall: rawCall,
        defer: defer, stringify: plainStringify, setFlush: function (f) { flushHook = f; } });
    }
    return habits[name];
  }
  function fromWeb(name) {
    if (web === null) web = call('source', 'webapi')();
    return web[name]();
  }
  function setGlobal(name, value) {
    define(g, name, { value: value, writable: true, configurable: true, enumerable: false });
  }
  function lazy(name, make) {
    define(g, name, {
      configurable: true, enumerable: false,
      get: function () { const v = make(name); setGlobal(name, v); return v; },
      set: function (v) { setGlobal(name, v); },
    });
  }
  for (const name of """
    + HABIT_NAMES
    + r""") lazy(name, fromHabits);
  for (const name of """
    + WEB_NAMES
    + r""") lazy(name, fromWeb);
}
"""
)
