// `kube:reconcile/events@0.1.0` in unit tests: events recorded in the fake host (host.mjs).

import { host } from './host.mjs';

export function recordEvent(regarding, type, reason, note) {
  host.events.push({ type, reason, note, regarding });
}
