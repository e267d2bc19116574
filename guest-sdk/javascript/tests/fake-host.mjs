// The host's imports for the SDK's tests under Node, in one module that stands for every
// `kube:reconcile/<interface>@0.1.0`: the client calls are recorded in `host.calls` and answered
// by `host.answer(call)` (which returns the stored object's JSON text or throws `hostError(...)`),
// log lines go to `host.logs`.

export const host = {
  calls: [],
  logs: [],
  /** The answer to a write: by default the API server stores what was sent. */
  answer: (call) => call.body,
  reset() {
    this.calls = [];
    this.logs = [];
    this.answer = (call) => call.body;
  },
};

/** What the engines throw for an import's `err(call-error)`: an Error whose `payload` is it. */
export function hostError(payload) {
  return Object.assign(new Error(`${payload.tag}: ${JSON.stringify(payload.val)}`), { payload });
}

function record(call) {
  host.calls.push(call);
  return host.answer(call);
}

/** `client.apply(object, force, subresource)`. */
export function apply(object, force, subresource) {
  return record({ verb: 'apply', body: object, force, subresource });
}

/** `client.patch(target, body, subresource)`: `body` is `{tag, val}`. */
export function patch(target, body, subresource) {
  return record({ verb: 'patch', target, tag: body.tag, body: body.val, subresource });
}

/** `log.log(level, message)`. */
export function log(level, message) {
  host.logs.push({ level, message });
}
