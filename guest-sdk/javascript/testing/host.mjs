// A fake host for a reconciler's unit tests under Node (`node --test`): no component, no API
// server. hooks.mjs resolves the host's imports (`kube:reconcile/<interface>@0.1.0`), which only
// a component has, to client.mjs, cache.mjs, events.mjs and log.mjs here, which answer from the
// store below. Register the hooks before importing the reconciler:
//
//   import { register } from 'node:module';
//   register('<sdk>/testing/hooks.mjs', import.meta.url);
//   const { host } = await import('<sdk>/testing/host.mjs');
//   const { reconcile } = await import('../src/reconciler.js');
//
// The store answers as an API server would in the ways reconcilers depend on: a write carrying a
// `metadata.resourceVersion` other than the stored one is refused 409 Conflict, a write or delete
// of an object that is not there 404 NotFound, a create of one that is 409 AlreadyExists; each
// write bumps the object's resourceVersion. `host.denied` holds verbs refused as a missing grant
// would be. Errors are thrown as the engines throw an import's `err(call-error)`: an Error whose
// `payload` is the call-error (`{tag: 'api', val: {code, reason, message}}`).

function keyOf(apiVersion, kind, namespace, name) {
  return JSON.stringify([apiVersion, kind, namespace ?? '', name]);
}

function objectKey(object) {
  const meta = object.metadata ?? {};
  return keyOf(object.apiVersion, object.kind, meta.namespace, meta.name);
}

/** What the engines throw for an import's `err(call-error)`. */
export function hostError(payload) {
  return Object.assign(new Error(`${payload.tag}: ${JSON.stringify(payload.val)}`), { payload });
}

function refused(code, reason, message) {
  return hostError({ tag: 'api', val: { code, reason, message } });
}

/** RFC 7386: `patch` merged into `target`. */
export function merge(target, patch) {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
    return patch;
  }
  const merged = target !== null && typeof target === 'object' && !Array.isArray(target)
    ? { ...target } : {};
  for (const [name, value] of Object.entries(patch)) {
    if (value === null) {
      delete merged[name];
    } else {
      merged[name] = merge(merged[name], value);
    }
  }
  return merged;
}

export const host = {
  objects: new Map(),
  version: 0,
  /** `{verb, apiVersion, kind, namespace, name}` of each client call, in order. */
  calls: [],
  /** `{type, reason, note, regarding}` of each event recorded. */
  events: [],
  /** `{level, message}` of each log line. */
  logs: [],
  /** Verbs refused as a missing grant would be: `host.denied.add('patch')`. */
  denied: new Set(),

  /** Empties the store and the records. */
  reset() {
    this.objects = new Map();
    this.version = 0;
    this.calls = [];
    this.events = [];
    this.logs = [];
    this.denied = new Set();
  },

  /** Stores a copy of `object` with a new resourceVersion; the stored copy. */
  put(object) {
    const stored = structuredClone(object);
    this.version += 1;
    stored.metadata = { ...(stored.metadata ?? {}), resourceVersion: String(this.version) };
    this.objects.set(objectKey(stored), stored);
    return structuredClone(stored);
  },

  /** The stored object, if any. */
  find(apiVersion, kind, namespace, name) {
    const found = this.objects.get(keyOf(apiVersion, kind, namespace, name));
    return found && structuredClone(found);
  },

  /** The request the host would send for `object` (stored first, as the cache holds it), or,
   *  `{deleted: true}`, once it is deleted. */
  request(object, { deleted = false, requeues = 0 } = {}) {
    const meta = object.metadata ?? {};
    const target = {
      kind: { apiVersion: object.apiVersion, kind: object.kind },
      namespace: meta.namespace,
      name: meta.name,
    };
    if (deleted) {
      this.objects.delete(objectKey(object));
      return { target, object: undefined, requeues };
    }
    return { target, object: JSON.stringify(this.put(object)), requeues };
  },

  call(verb, apiVersion, kind, namespace, name) {
    if (this.denied.has(verb)) {
      const place = namespace ? `in namespace \`${namespace}\`` : 'cluster-wide';
      throw hostError({
        tag: 'denied',
        val: `plugin \`test\` has no grant to \`${verb}\` ${apiVersion} ${kind} ${place}`,
      });
    }
    this.calls.push({ verb, apiVersion, kind, namespace: namespace ?? '', name });
  },

  write(key, object) {
    const sent = object.metadata?.resourceVersion;
    const stored = this.objects.get(key);
    if (sent && stored && sent !== stored.metadata.resourceVersion) {
      throw refused(409, 'Conflict', `the object ${object.metadata.name} has been modified`);
    }
    return JSON.stringify(this.put(object));
  },

  key: keyOf,
  objectKey,
  refused,
};
