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
//
// Writes with a precondition: `applyAtVersion(object, resourceVersion)` and
// `mergePatchAtVersion(target, patch, resourceVersion)` write only if the object is still at the
// version the reconcile read (409 Conflict otherwise), the JavaScript side of the Rust SDK's
// `client::apply_at_version` and `client::merge_patch_at_version`.
//
// Tests: `node --test guest-sdk/javascript/tests/reconciler.test.mjs` (Node's own runner; the
// host's imports are faked by tests/kube-host-hooks.mjs).

import * as client from 'kube:reconcile/client@0.1.0';
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

/**
 * Server-side applies `object` (a plain object; with force, as `client.apply(text, true,
 * undefined)`) only if the object is still at `resourceVersion`: the API server refuses the write
 * with 409 Conflict when anyone wrote the object since. Pass the version the reconcile read it at
 * (the cached object's `metadata.resourceVersion`), so a write made from a stale read, or one
 * that left a replica after another had taken its work over, changes nothing. `object` itself is
 * not changed. Returns the object as stored, parsed.
 *
 * Throws what the host throws (an Error whose `payload` is the call-error; a conflict is
 * `{tag: 'api', val: {code: 409, ...}}`), or, without calling the host, a TypeError (`object` or
 * its `metadata` is not a plain object, the version not a string) or a RangeError (an empty
 * version).
 */
export function applyAtVersion(object, resourceVersion) {
  const sent = JSON.stringify(atVersion(object, resourceVersion));
  return JSON.parse(client.apply(sent, true, undefined));
}

/**
 * Applies a JSON merge patch (RFC 7386, a plain object) to `target` (`{kind: {apiVersion, kind},
 * namespace, name}`) only if the object is still at `resourceVersion` (409 Conflict otherwise,
 * see `applyAtVersion`). `patch` itself is not changed. Returns the object as stored, parsed;
 * throws as `applyAtVersion` does.
 */
export function mergePatchAtVersion(target, patch, resourceVersion) {
  const body = { tag: 'merge', val: JSON.stringify(atVersion(patch, resourceVersion)) };
  return JSON.parse(client.patch(target, body, undefined));
}

/**
 * A copy of `document` (an object to apply or a merge patch) with `metadata.resourceVersion` set
 * to `resourceVersion`, replacing any it carries: the API server takes it as a precondition.
 */
function atVersion(document, resourceVersion) {
  if (typeof resourceVersion !== 'string') {
    throw new TypeError(
      'the resourceVersion of a precondition is a string (the metadata.resourceVersion of the ' +
        `object as the reconcile read it), got ${describe(resourceVersion)}`);
  }
  if (resourceVersion === '') {
    throw new RangeError(
      'an empty resourceVersion is no precondition; pass the metadata.resourceVersion of the ' +
        'object as the reconcile read it');
  }
  if (!isPlainObject(document)) {
    throw new TypeError(
      'a write with a resourceVersion precondition needs a JSON object (an object to apply or a ' +
        `merge patch), not an array or a scalar; got ${describe(document)}` +
        (typeof document === 'string' ? ' (JSON.parse the text first)' : ''));
  }
  // An `undefined` member is one JSON.stringify leaves out: no metadata yet.
  const metadata = document.metadata === undefined ? {} : document.metadata;
  if (!isPlainObject(metadata)) {
    throw new TypeError(`metadata must be a JSON object, got ${describe(metadata)}`);
  }
  return { ...document, metadata: { ...metadata, resourceVersion } };
}

/** Whether `value` is a JSON object: not null, an array or a scalar. */
function isPlainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
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
