// Console, timers and sleep for code-mode guests, evaluated on a cell's first use of one of
// them; see habits.py.
function (cap) {
  'use strict';
  const S = String, call = cap.call, request = cap.request, rawCall = cap.rawCall;
  const defer = cap.defer, stringify = cap.stringify;
  // Console lines are batched: the first of a synchronous run crosses at once, later ones at
  // the next microtask checkpoint, every 256 lines, or before any other bridge crossing.
  let lines = [], armed = false;
  function flush() {
    if (lines.length === 0) return;
    const batch = lines;
    lines = [];
    rawCall('texts', stringify(batch));
  }
  cap.setFlush(flush);
  function emit(s) {
    if (armed) {
      lines.push(s);
      if (lines.length >= 256) flush();
      return;
    }
    armed = true;
    defer(function () { armed = false; flush(); });
    rawCall('text', s);
  }
  const clock = performance, now = function () { return clock.now(); };
  // The inspector (`util.inspect`, %-specifiers) loads on the first value that needs it: a
  // program that only logs strings and numbers never carries it.
  let inspector = null;
  function fmt() {
    if (inspector === null) inspector = call('source', 'inspect')();
    return inspector;
  }
  function format(args) { return fmt().format(args); }
  let groupIndent = '';
  // Strings and non-zero numbers are joined with spaces right here, so the common
  // `console.log('label', n)` costs about as much as logging one string. Anything else
  // (objects, -0, a %-specifier in the first of several arguments) goes to the inspector.
  // `plainFirst` is the last first argument found to hold no '%': a loop logging the same
  // label skips the search.
  let plainFirst = '', plainSpaced = ' ';
  function hasSpecifier(s) {
    if (s.indexOf('%') !== -1) return true;
    plainFirst = s;
    plainSpaced = s + ' ';
    return false;
  }
  function out(args) {
    const n = args.length;
    let s = args[0];
    if (typeof s !== 'string') {
      s = format(args);
    } else if (n > 1) {
      if (s !== plainFirst && hasSpecifier(s)) {
        s = format(args);
      } else if (n === 2) {
        const a = args[1];
        s = (typeof a === 'number' ? a !== 0 : typeof a === 'string') ? plainSpaced + a : format(args);
      } else {
        for (let i = 1; i < n; i++) {
          const a = args[i];
          if (typeof a === 'number' ? a !== 0 : typeof a === 'string') {
            s += ' ' + a;
          } else {
            s = format(args);
            break;
          }
        }
      }
    }
    if (groupIndent !== '') s = groupIndent + s.split('\n').join('\n' + groupIndent);
    emit(s);
  }
  const counts = new Map(), timers = new Map();
  const log = function () { out(arguments); };
  function table(data, columns) {
    if (data === null || typeof data !== 'object') { out([data]); return; }
    const rows = [], cols = [], hasValues = { v: false };
    const rowKeys = Object.keys(data);
    for (const rk of rowKeys) {
      const row = data[rk], cells = {};
      if (row !== null && typeof row === 'object') {
        for (const c of Object.keys(row)) {
          if (columns && columns.indexOf(c) === -1) continue;
          if (cols.indexOf(c) === -1) cols.push(c);
          cells[c] = fmt().inspect(row[c], 1, [], '');
        }
      } else { hasValues.v = true; cells['\0v'] = fmt().inspect(row, 1, [], ''); }
      rows.push([rk, cells]);
    }
    const head = ['(index)'].concat(cols, hasValues.v ? ['Values'] : []);
    const body = rows.map(function (r) {
      return [r[0]].concat(cols.map(function (c) { return c in r[1] ? r[1][c] : ''; }),
        hasValues.v ? [r[1]['\0v'] === undefined ? '' : r[1]['\0v']] : []);
    });
    const widths = head.map(function (h, i) {
      let w = h.length;
      for (const b of body) w = Math.max(w, b[i].length);
      return w + 2;
    });
    const cell = function (s, w) {
      const left = Math.floor((w - s.length) / 2);
      return ' '.repeat(left) + s + ' '.repeat(w - s.length - left);
    };
    const line = function (l, m, r) {
      return l + widths.map(function (w) { return '─'.repeat(w); }).join(m) + r;
    };
    const lines = [line('┌', '┬', '┐'),
      '│' + head.map(function (h, i) { return cell(h, widths[i]); }).join('│') + '│',
      line('├', '┼', '┤')];
    for (const b of body) lines.push('│' + b.map(function (s, i) { return cell(s, widths[i]); }).join('│') + '│');
    lines.push(line('└', '┴', '┘'));
    out([lines.join('\n')]);
  }
  const con = {
    log: log, info: log, debug: log, warn: log, error: log, trace: log,
    dir: function (v) { out([typeof v === 'string' ? fmt().inspect(v, 1, [], '') : v]); },
    table: table,
    assert: function (ok) {
      if (ok) return;
      const rest = Array.prototype.slice.call(arguments, 1);
      out(rest.length === 0 ? ['Assertion failed'] : ['Assertion failed:'].concat(rest));
    },
    count: function (label) {
      const l = label === undefined ? 'default' : S(label);
      const n = (counts.get(l) || 0) + 1;
      counts.set(l, n);
      out([l + ': ' + n]);
    },
    countReset: function (label) { counts.delete(label === undefined ? 'default' : S(label)); },
    time: function (label) { timers.set(label === undefined ? 'default' : S(label), now()); },
    timeLog: function (label) {
      const l = label === undefined ? 'default' : S(label), t = timers.get(l);
      const extra = Array.prototype.slice.call(arguments, 1);
      out([t === undefined ? "Warning: No such label '" + l + "'"
        : l + ': ' + (now() - t).toFixed(3) + 'ms'].concat(t === undefined ? [] : extra));
    },
    timeEnd: function (label) {
      const l = label === undefined ? 'default' : S(label);
      con.timeLog(l);
      timers.delete(l);
    },
    group: function () {
      if (arguments.length > 0) out(arguments);
      groupIndent += '  ';
    },
    groupEnd: function () { groupIndent = groupIndent.slice(0, -2); },
  };
  con.groupCollapsed = con.group;

  // ---- timers: host requests on the host clock ----------------------------------------------
  const active = new Map();
  let nextId = 1, nextToken = 1;
  function report(e) {
    let s;
    try { s = e instanceof Error ? fmt().format([e]) : fmt().inspect(e, 1, [], ''); } catch (_) {
      s = 'exception';
    }
    try { emit('Uncaught ' + s); } catch (_) { /* the output limit: the run fails anyway */ }
  }
  function arm(id, t) {
    const token = nextToken++;
    t.token = token;
    request('timer', { ms: t.ms, token: token }).then(function () {
      if (active.get(id) !== t || t.token !== token) return;
      if (t.repeat) arm(id, t); else active.delete(id);
      try { t.fn.apply(undefined, t.args); } catch (e) { report(e); }
    }, function (e) { if (active.get(id) === t) { active.delete(id); report(e); } });
  }
  function schedule(kind, fn, ms, args, repeat) {
    if (typeof fn !== 'function') {
      throw new TypeError('The "callback" argument of ' + kind + ' must be a function');
    }
    if (active.size >= /*MAX_TIMERS*/) {
      throw new RangeError('too many active timers (/*MAX_TIMERS*/); clear some first');
    }
    let delay = +ms;
    if (!(delay >= 0) || delay > 2147483647) delay = 0;
    if (repeat && delay < 1) delay = 1;
    const id = nextId++;
    const t = { fn: fn, args: args, ms: delay, repeat: repeat, token: 0 };
    active.set(id, t);
    arm(id, t);
    return id;
  }
  function clear(id) {
    const key = typeof id === 'object' && id !== null ? +id : id;
    const t = active.get(key);
    if (t === undefined) return;
    active.delete(key);
    call('timer_clear', S(t.token));
  }
  const rest = function (a) { return Array.prototype.slice.call(a, 2); };
  return {
    console: con,
    setTimeout: function setTimeout(fn, ms) {
      return schedule('setTimeout', fn, ms, rest(arguments), false);
    },
    setInterval: function setInterval(fn, ms) {
      return schedule('setInterval', fn, ms, rest(arguments), true);
    },
    clearTimeout: function clearTimeout(id) { clear(id); },
    clearInterval: function clearInterval(id) { clear(id); },
    sleep: function sleep(ms) {
      return new Promise(function (resolve) { schedule('sleep', resolve, ms, [], false); });
    },
  };
}
