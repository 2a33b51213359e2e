"""The sandbox's internal JavaScript prelude (the guest half of the bridge).

It is evaluated once per boot, before any embedding or user code, as a function expression
called with the two raw host functions and the embedding's setup function. It:

- captures every intrinsic it relies on (JSON, Promise, Map methods, String methods, Error)
  while they are still pristine, so guests that monkey-patch them cannot affect the bridge;
- closes over the raw host functions: they are never stored on any reachable object;
- hands the setup function one frozen capability object
  `{call, request, requestJson, stringify, tooDeep}` (`requestJson` takes a payload the setup
  serialized itself, with `stringify`);
- disables `Error.prepareStackTrace`, whose call sites would expose private functions;
- returns `[settle, finish, describe]` to the host, which keeps their handles (they are part
  of every snapshot, see `snapshot.CellState`, so they survive restore);
- serializes every value that leaves the VM (the final value, request payloads, and what the
  setup's `cap.stringify` is given) with a nesting check: a value deeper than
  `MAX_VALUE_DEPTH` throws `RangeError: <TOO_DEEP>` instead of recursing in C until the wasm
  stack traps (and the host could not decode it anyway).

Like every trusted script (`VM.eval_cached`), it is loaded as bytecode without debug information:
its functions print as `[native code]`, its stack frames carry no location, and its source text
never sits in the heap or in snapshots.

Wire protocol between this prelude and `bridge.py`: one string per crossing, fields separated
by NUL (ops may not contain NUL), because every extra argument costs host<->wasm calls.

- `hostCall(op + "\\0" + payloadJson)` returns a tagged string: "\\x00" + result, or
  "\\x01" + error message (the guest then throws `Error(message)`), or a function (the value
  of a `TrustedScript`, evaluated from cached bytecode), or anything else for no result.
- `hostRequest(id + "\\0" + op + "\\0" + payloadJson)` returns a tagged string that settles
  the request at once: "\\x00" + value JSON, "\\x01" + message; anything else leaves it
  pending.
- "No result" is `undefined`, or a boolean: the host hands back the box of an earlier
  `settle` result instead of making a new one (one wasm crossing fewer per tool call).
- The host later calls `settle(id + "\\0" + tagged)` with the same tagging.
- `finish(value)` returns the JSON text of the final value; `describe(error)` returns
  `{"name", "message", "stack", "error"}` as JSON text.
"""

from __future__ import annotations

import json
from typing import Final

PRELUDE_FILENAME: Final = "<nodmix>"

MAX_VALUE_DEPTH: Final = 256
"""How deeply the objects and arrays of a value leaving the VM may nest."""

TOO_DEEP: Final = f"the program's value nests too deeply (limit {MAX_VALUE_DEPTH} levels)"
"""The message of the `RangeError` a too-deep value throws."""

_PRELUDE: Final = r"""
(function (hostCall, hostRequest, setup) {
  'use strict';
  const FunctionCall = Function.prototype.call;
  const uncurry = (fn) => FunctionCall.bind(fn);
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const PromiseCtor = Promise;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const StringCtor = String;
  const MapCtor = Map;
  const RangeErrorCtor = RangeError;
  const freeze = Object.freeze;
  const createObject = Object.create;
  const mapGet = uncurry(MapCtor.prototype.get);
  const mapSet = uncurry(MapCtor.prototype.set);
  const mapDelete = uncurry(MapCtor.prototype.delete);
  const charCodeAt = uncurry(StringCtor.prototype.charCodeAt);
  const slice = uncurry(StringCtor.prototype.slice);
  const indexOf = uncurry(StringCtor.prototype.indexOf);
  const pending = new MapCtor();
  let nextId = 1;

  // QuickJS-NG implements V8's Error.prepareStackTrace, whose call sites expose the function
  // of every frame (strict ones included). Lock it, so a guest cannot collect the bridge's
  // (or the setup script's) private functions from a stack trace.
  Object.defineProperty(ErrorCtor, 'prepareStackTrace', {
    value: undefined, writable: false, enumerable: false, configurable: false,
  });

  function safeString(value) {
    try { return StringCtor(value); } catch (e) { return '[unprintable value]'; }
  }

  // JSON.stringify with a nesting check. The replacer is called with `this` set to the
  // object or array whose key it serializes, depth first, so `path` (a prototype-less stack of
  // the objects being serialized) unwinds to the holder and its length is the depth.
  function checkedStringify(value, transform) {
    const path = createObject(null);
    let depth = 0;
    return stringify(value, function (key, v) {
      if (transform !== undefined) v = transform(v);
      while (depth > 0 && path[depth - 1] !== this) depth--;
      if (v !== null && typeof v === 'object') {
        if (depth >= __MAX_DEPTH__) throw new RangeErrorCtor(__TOO_DEEP__);
        path[depth++] = v;
      }
      return v;
    });
  }

  function settleEntry(id, tag, body) {
    const entry = mapGet(pending, id);
    if (entry === undefined) return false;
    mapDelete(pending, id);
    if (tag === 0) {
      let value;
      try { value = parse(body); } catch (e) {
        entry.reject(new ErrorCtor('the host delivered invalid JSON'));
        return true;
      }
      entry.resolve(value);
    } else {
      entry.reject(new ErrorCtor(body));
    }
    return true;
  }

  function settle(message) {
    const cut = indexOf(message, '\0');
    const id = +slice(message, 0, cut);
    return settleEntry(id, charCodeAt(message, cut + 1), slice(message, cut + 2));
  }

  function checkOp(op, what) {
    if (typeof op !== 'string' || op === '' || indexOf(op, '\0') !== -1) {
      throw new TypeErrorCtor(what + ': op must be a non-empty string without NUL');
    }
  }

  function call(op, payloadJson) {
    checkOp(op, 'call');
    if (typeof payloadJson !== 'string') {
      throw new TypeErrorCtor('call: payload must be a JSON string');
    }
    const reply = hostCall(op + '\0' + payloadJson);
    if (typeof reply === 'function') return reply;  // a TrustedScript's value
    if (typeof reply !== 'string') return undefined;  // no reply
    if (charCodeAt(reply, 0) === 0) return slice(reply, 1);
    throw new ErrorCtor(slice(reply, 1));
  }

  function request(op, payload) {
    return send(op, payload, false);
  }

  // The same for a payload the setup already serialized (one pass instead of two).
  function requestJson(op, payloadJson) {
    return send(op, payloadJson, true);
  }

  function send(op, payload, serialized) {
    let entry;
    const promise = new PromiseCtor(function (resolve, reject) {
      entry = { resolve: resolve, reject: reject };
    });
    let json;
    try {
      checkOp(op, 'request');
      if (serialized) {
        if (typeof payload !== 'string') {
          throw new TypeErrorCtor('requestJson: payload must be a JSON string');
        }
        json = payload;
      } else {
        json = checkedStringify(payload === undefined ? null : payload, undefined);
        if (json === undefined) json = 'null';
      }
    } catch (e) {
      entry.reject(e);
      return promise;
    }
    const id = nextId++;
    mapSet(pending, id, entry);
    const reply = hostRequest(id + '\0' + op + '\0' + json);
    if (typeof reply === 'string') settleEntry(id, charCodeAt(reply, 0), slice(reply, 1));
    return promise;
  }

  function plain(value) {
    if (typeof value === 'bigint') return safeString(value);
    if (value instanceof ErrorCtor) {
      return { name: safeString(value.name), message: safeString(value.message) };
    }
    return value;
  }

  function finish(value) {
    if (value === undefined) return 'null';
    const type = typeof value;
    if (type === 'bigint' || type === 'symbol' || type === 'function') {
      return stringify(safeString(value));
    }
    try {
      const json = checkedStringify(value, plain);
      return json === undefined ? 'null' : json;
    } catch (e) {
      if (e instanceof RangeErrorCtor && e.message === __TOO_DEEP__) throw e;
      let why = 'unserializable';
      try { why = safeString(e && e.message); } catch (e2) { /* keep the default */ }
      return stringify('[unserializable value: ' + why + ']');
    }
  }

  function describe(error) {
    let name = '';
    let message = '';
    let stack = '';
    let isError = false;
    try {
      if (error !== null && (typeof error === 'object' || typeof error === 'function')) {
        isError = error instanceof ErrorCtor;
        const n = error.name;
        const m = error.message;
        const s = error.stack;
        if (typeof n === 'string') name = n;
        if (typeof m === 'string') message = m;
        if (typeof s === 'string') stack = s;
        if (!isError && name === '' && message === '') {
          try { message = stringify(error); } catch (e) { message = undefined; }
          if (typeof message !== 'string') message = safeString(error);
        }
      } else {
        message = safeString(error);
      }
    } catch (e) {
      if (message === '') message = 'unprintable exception';
    }
    return stringify({
      name: slice(name, 0, 200),
      message: slice(message, 0, 2000),
      stack: slice(stack, 0, 4000),
      error: isError,
    });
  }

  const stringifyChecked = function (value) { return checkedStringify(value, undefined); };
  if (setup !== undefined) {
    setup(freeze({
      call: call, request: request, requestJson: requestJson, stringify: stringifyChecked,
      tooDeep: __TOO_DEEP__,
    }));
  }
  return [settle, finish, describe];
})
"""

PRELUDE: Final = _PRELUDE.replace("__MAX_DEPTH__", str(MAX_VALUE_DEPTH)).replace(
    "__TOO_DEEP__", json.dumps(TOO_DEEP)
)


def wrap_async(source: str) -> str:
    """Wrap a cell body as an async IIFE, so top-level `await` and `return` work.

    The opening is on the first source line, so guest line numbers stay unchanged.
    """
    return "(async () => {" + source + "\n})()"


def strict_setup(setup_script: str) -> str:
    """The setup function expression as a strict-mode script (its functions then never
    expose `caller`/`arguments`).
    """
    return f"'use strict';\n({setup_script}\n)"
