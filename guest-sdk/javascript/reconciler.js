// The JavaScript guest SDK's glue: `reconciler(fn)` turns a reconcile function into the
// component's `reconcile` export, so the mistakes the JavaScript engine would only answer with a
// bare trap (`<wasm function N>` frames, nothing in the log) are named:
//
//   import { reconciler } from '../../guest-sdk/javascript/reconciler.js';
//   export const reconcile = reconciler(function reconcileWebsite(request) { ...; return { tag: 'done' }; });
//
// - Whatever `fn` throws becomes the WIT `reconcile-error` (the host logs it and retries with
//   backoff): an Error's name, message and stack; a thrown `{message}` as it is.
// - A return value that is not an action — `{tag: 'done'}`, `{tag: 'requeue'}` or
//   `{tag: 'requeue-after', val: <milliseconds, 0 to 2^32-1>}` — is logged at error through
//   `kube:reconcile/log` with what was returned and the fix, then stops the call (a thrown
//   TypeError, a trap): the component cannot reconcile anything, so `reconcile-host check`
//   fails on it and a hot reload rolls it back.
// - `reconciler(x)` with something that is not a function throws when the module is loaded,
//   which fails the build.
//
// The export must be named `reconcile` (`export const reconcile = ...` or
// `export function reconcile(request)`); an engine finds nothing else, and a component whose
// module misspells it builds and traps on every call. `reconcile-host check` names that too.

import * as log from 'kube:reconcile/log@0.1.0';

/** The largest `requeue-after` delay the WIT's `u32` milliseconds can carry (about 49 days). */
export const MAX_REQUEUE_AFTER_MS = 2 ** 32 - 1;

/** The component's `reconcile` export, calling `fn(request)`. */
export function reconciler(fn) {
  if (typeof fn !== 'function') {
    throw new TypeError(
      `reconciler() takes the reconcile function, got ${describe(fn)}; write ` +
        '`export const reconcile = reconciler(yourFunction)`');
  }
  const name = fn.name || 'the reconcile function';
  return function reconcile(request) {
    let action;
    try {
      action = fn(request);
    } catch (error) {
      // A plain object: both engines turn it into `reconcile-error`.
      throw { message: messageOf(error) };
    }
    if (isAction(action)) {
      return action;
    }
    const message =
      `${name} returned ${describe(action)} where an action was expected; return ` +
      "{tag: 'done'}, {tag: 'requeue'} or {tag: 'requeue-after', val: milliseconds}" +
      (action instanceof Promise
        ? ' (reconcile must be synchronous: the host does not run the event loop)'
        : '');
    log.log('error', message);
    // An Error instance: the engine traps (the log line above says why).
    throw new TypeError(message);
  };
}

/** Whether `action` is one of the WIT `action` cases. */
export function isAction(action) {
  if (action === null || typeof action !== 'object') {
    return false;
  }
  switch (action.tag) {
    case 'done':
    case 'requeue':
      return true;
    case 'requeue-after':
      return Number.isInteger(action.val) && action.val >= 0 && action.val <= MAX_REQUEUE_AFTER_MS;
    default:
      return false;
  }
}

/** An error's text for the reconcile error: name and message, then the stack if there is one. */
export function messageOf(error) {
  if (error instanceof Error) {
    const head = `${error.name}: ${error.message}`;
    return error.stack ? `${head}\n${error.stack}`.trimEnd() : head;
  }
  if (error !== null && typeof error === 'object' && 'message' in error) {
    return String(error.message);
  }
  return String(error);
}

/** A value as a mistake report shows it: its type and a short rendering. */
function describe(value) {
  if (value === undefined) {
    return 'undefined (a missing `return`?)';
  }
  if (value === null) {
    return 'null';
  }
  if (value instanceof Promise) {
    return 'a Promise';
  }
  let text;
  try {
    text = JSON.stringify(value);
  } catch {
    text = String(value);
  }
  if (text !== undefined && text.length > 60) {
    text = `${text.slice(0, 60)}…`;
  }
  const type = Array.isArray(value) ? 'array' : typeof value;
  return text === undefined ? type : `${type} ${text}`;
}
