// Plugin namespaces and the `MCP` namespace of code-mode guests: a frozen object tree whose
// functions are bridge requests, and per MCP server a function per tool plus `$api()`. The guest
// setup evaluates it only in runs that see such namespaces, so other cells carry none of it;
// see guest.py.
function (cap) {
  'use strict';
  const nsRequest = cap.nsRequest, frozenCopy = cap.frozenCopy;
  const resolved = cap.resolved, rejected = cap.rejected;
  const S = String, E = Error, freeze = Object.freeze, create = Object.create;
  const keys = Object.keys, isArray = Array.isArray;
  function makeNamespace(node, path) {
    if (node === null || typeof node !== 'object') return node;
    if (node.$fn !== undefined) {
      const fnPath = node.$fn;
      const fn = function () { return nsRequest(fnPath, arguments); };
      return freeze(fn);
    }
    if (isArray(node)) return freeze(node.map(function (v) { return makeNamespace(v, path); }));
    const out = create(null);
    for (const k of keys(node)) out[k] = makeNamespace(node[k], path + '.' + k);
    return freeze(out);
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
  function mcpRoot(mcp) {
    const api = mcp.api;
    const root = create(null);
    root.$api = function () {
      return resolved(frozenCopy({ kind: 'mcp_api', scope: 'root', header: api.$root.header,
                                   servers: api.$root.servers, note: api.$root.note }));
    };
    for (const ident of keys(mcp.descriptor)) {
      root[ident] = mcpServer(ident, mcp.descriptor[ident], api[ident]);
    }
    return freeze(root);
  }
  const namespaces = create(null);
  for (const name of keys(cap.namespaces)) {
    namespaces[name] = makeNamespace(cap.namespaces[name], name);
  }
  if (cap.mcp) namespaces.MCP = mcpRoot(cap.mcp);
  return namespaces;
}
