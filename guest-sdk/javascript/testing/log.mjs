// `kube:reconcile/log@0.1.0` in unit tests: lines recorded in the fake host (host.mjs).

import { host } from './host.mjs';

export function log(level, message) {
  host.logs.push({ level, message });
}
