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

Code that only some runs use is not part of this script: the plugin and MCP namespace builder
(`js/namespaces.js`) is evaluated at boot only when the run has namespaces, `API.list`/`API.read`
(`js/api.js`) on their first call, and console, timers and web globals on first read
(`habits.py`). Each comes from the host as a `TrustedScript`, so a small suspended run's heap,
and its stored snapshot, holds only what the run touched.
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

  const callTool = function (ref, input) {
    const id = S(ref);
    const json = input === undefined ? '{}' : safeJson(input);
    // The payload nests one level deeper than the input: only a text this long can reach the
    // depth limit, so only then is the payload serialized (and checked) as a whole.
    if (json.length >= """
    + str(2 * MAX_VALUE_DEPTH)
    + r""") {
      return request('call', { ref: id, input: parse(json) });
    }
    return requestJson('call', '{"ref":' + plainStringify(id) + ',"input":' + json + '}');
  };
  // A namespace function's request: `request('ns', { path, args })` with each argument passed
  // through `safe`, serializing each argument once (by string concatenation: guest code may
  // have replaced `Array.prototype` methods). The checks are `callTool`'s: only arguments this
  // long can nest deeply enough to need the whole payload checked.
  const nsRequest = function (path, args) {
    let json = '[';
    for (let i = 0; i < args.length; i++) json += (i === 0 ? '' : ',') + safeJson(args[i]);
    json += ']';
    if (json.length >= """
    + str(2 * MAX_VALUE_DEPTH)
    + r""") {
      return request('ns', { path: path, args: parse(json) });
    }
    return requestJson('ns', '{"path":' + plainStringify(path) + ',"args":' + json + '}');
  };
  const tools = create(null);
  tools.search = function (query, options) {
    const limit = options !== null && typeof options === 'object' && options.limit !== undefined
      ? options.limit : null;
    return request('search', { query: query === undefined ? '' : S(query), limit: limit });
  };
  tools.describe = function (id) { return request('describe', { ref: S(id) }); };
  tools.call = callTool;
  for (const name of keys(boot.safe)) {
    const id = boot.safe[name];
    tools[name] = function (input) { return callTool(id, input); };
  }

  // `API.list`/`API.read` load their code on first use (see js/api.js).
  const files = boot.files;
  let apiImpl = null;
  function api() {
    if (apiImpl === null) {
      apiImpl = call('source', 'api')({ files: files, frozenCopy: frozenCopy,
        resolved: resolved, rejected: rejected });
    }
    return apiImpl;
  }
  const API = freeze({
    list: function (prefix) { return api().list(prefix); },
    read: function (path) { return api().read(path); },
  });

  // Plugin and MCP namespaces: their builder is loaded only by runs that have some.
  const namespaces = boot.mcp || keys(boot.namespaces).length > 0
    ? call('source', 'namespaces')({ namespaces: boot.namespaces, mcp: boot.mcp,
      nsRequest: nsRequest, frozenCopy: frozenCopy, resolved: resolved, rejected: rejected })
    : create(null);

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
    return request('yield', { reason: reason === undefined ? null : S(reason) });
  });
  // Node and web globals, built on first read (see habits.py). The host serves each web global
  // the script of its group (`WEB_GLOBALS`), whose builders then serve the group's other names.
  let habits = null, web = null;
  function fromHabits(name) {
    if (habits === null) {
      habits = call('source', 'habits')({ call: call, request: request, rawCall: rawCall,
        defer: defer, stringify: plainStringify, setFlush: function (f) { flushHook = f; } });
    }
    return habits[name];
  }
  function fromWeb(name) {
    if (web === null) web = create(null);
    if (web[name] === undefined) {
      const builders = call('source', 'web:' + name)();
      for (const k of keys(builders)) web[k] = builders;
    }
    return web[name][name]();
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
