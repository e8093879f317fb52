// The JavaScript half of mirai's guest, evaluated once at pre-initialization.
//
// It captures the built-ins it relies on before any program runs, so a program
// that tampers with JSON, Error, Object or Promise changes only its own view.
// It answers the hooks the Rust half calls: `start` (per eval: builds `mirai`
// from the operation names the host sends, `console`, a seeded Math.random),
// and `ok` / `fail` / `pending`, which encode the program's outcome as JSON.
(function (native) {
  "use strict";
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const freeze = Object.freeze;
  const create = Object.create;
  const defineProperty = Object.defineProperty;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const StringCtor = String;
  const isArray = Array.isArray;
  const join = Function.prototype.call.bind(Array.prototype.join);
  const map = Function.prototype.call.bind(Array.prototype.map);
  const split = Function.prototype.call.bind(String.prototype.split);
  const exec = Function.prototype.call.bind(RegExp.prototype.exec);
  const weakHas = Function.prototype.call.bind(WeakMap.prototype.has);
  const weakGet = Function.prototype.call.bind(WeakMap.prototype.get);
  const weakSet = Function.prototype.call.bind(WeakMap.prototype.set);
  const nativeCall = native.call;
  const nativeOut = native.out;
  const globals = globalThis;

  // Errors thrown by operations, with the code and message the host gave them.
  const operationErrors = new WeakMap();

  function operationError(error) {
    const e = new ErrorCtor(error.message);
    e.code = error.code;
    weakSet(operationErrors, e, { code: error.code, message: error.message });
    return e;
  }

  function operation(name) {
    const fn = async function (request) {
      const body = request === undefined ? "{}" : stringify(request);
      if (typeof body !== "string") {
        throw new TypeErrorCtor(`mirai.${name}: the request must be a JSON object`);
      }
      const answer = parse(nativeCall(name, body));
      if (answer.error) throw operationError(answer.error);
      return answer.ok;
    };
    defineProperty(fn, "name", { value: name });
    return fn;
  }

  function buildMirai(names) {
    const root = create(null);
    for (const name of names) {
      const parts = split(name, ".");
      let node = root;
      for (let i = 0; i < parts.length - 1; i++) {
        node[parts[i]] = node[parts[i]] || create(null);
        node = node[parts[i]];
      }
      node[parts[parts.length - 1]] = operation(name);
    }
    return deepFreeze(root);
  }

  function deepFreeze(node) {
    for (const key of Object.keys(node)) {
      if (typeof node[key] === "object") deepFreeze(node[key]);
      else freeze(node[key]);
    }
    return freeze(node);
  }

  function show(value) {
    if (typeof value === "string") return value;
    if (value instanceof ErrorCtor) return `${value.name}: ${value.message}`;
    try {
      const text = stringify(value);
      if (typeof text === "string") return text;
    } catch (_) {
      // Cyclic or BigInt: fall back to String below.
    }
    try {
      return StringCtor(value);
    } catch (_) {
      return "[value that cannot be shown]";
    }
  }

  function log(...args) {
    nativeOut(stringify(join(map(args, show), " ")) + "\n");
  }

  const consoleObject = freeze({ log, info: log, warn: log, error: log, debug: log });

  // xorshift128+, seeded per eval: a snapshot would otherwise replay one sequence.
  function seededRandom(seed) {
    let s0 = (seed[0] >>> 0) || 0x9e3779b9;
    let s1 = (seed[1] >>> 0) || 0x85ebca6b;
    return function random() {
      let x = s0;
      const y = s1;
      s0 = y;
      x ^= x << 23;
      x ^= x >>> 17;
      x ^= y ^ (y >>> 26);
      s1 = x >>> 0;
      return ((s0 + s1) >>> 0) / 4294967296;
    };
  }

  function start(configText) {
    const config = parse(configText);
    defineProperty(globals, "mirai", { value: buildMirai(config.operations), enumerable: false });
    defineProperty(globals, "console", { value: consoleObject, enumerable: false });
    Math.random = seededRandom(config.seed);
  }

  function ok(value) {
    if (value === undefined) return '{"ok":null}';
    const text = stringify(value);
    if (typeof text !== "string") {
      return failWith("sandbox_error", `the program returned a ${typeof value}, which is not JSON; return an object, array, string, number, boolean or null`);
    }
    return '{"ok":' + text + "}";
  }

  function lineOf(error) {
    try {
      const match = exec(/program\.js:(\d+)/, StringCtor(error.stack));
      return match ? Number(match[1]) : null;
    } catch (_) {
      return null;
    }
  }

  function failWith(code, message, line) {
    const error = { code, message: StringCtor(message) };
    if (line) error.line = line;
    return stringify({ error });
  }

  function fail(thrown) {
    if (thrown !== null && typeof thrown === "object" && weakHas(operationErrors, thrown)) {
      const original = weakGet(operationErrors, thrown);
      return failWith(original.code, original.message);
    }
    if (thrown instanceof ErrorCtor) {
      let name = "Error";
      let message = "";
      try {
        name = StringCtor(thrown.name);
        message = StringCtor(thrown.message);
      } catch (_) {
        // A hostile getter: keep the defaults.
      }
      if (name === "InternalError" && message === "out of memory") {
        return failWith("sandbox_memory", "the program ran out of memory (JavaScript heap limit reached)");
      }
      const line = lineOf(thrown);
      return failWith("sandbox_error", line ? `${name}: ${message} (line ${line})` : `${name}: ${message}`, line);
    }
    let shown;
    try {
      shown = isArray(thrown) ? stringify(thrown) : StringCtor(thrown);
    } catch (_) {
      shown = "a value that cannot be shown";
    }
    return failWith("sandbox_error", `uncaught exception: ${shown}`);
  }

  function pending() {
    return failWith(
      "sandbox_error",
      "the program awaited a promise that never settles (the sandbox has no timers or events; only mirai.* calls are asynchronous)"
    );
  }

  return { start, ok, fail, pending };
})
