// `kube:reconcile/cache@0.1.0` in unit tests: the fake host's store (host.mjs).

import { host } from './host.mjs';

export function get(kind, namespace, name) {
  const found = host.objects.get(host.key(kind.apiVersion, kind.kind, namespace, name));
  return found ? JSON.stringify(found) : undefined;
}

/** `key=value` and `key` terms of the label selector only. */
export function list(kind, namespace, selector) {
  const terms = (selector ?? '').split(',').filter((term) => term !== '');
  const selected = (object) => {
    const labels = object.metadata?.labels ?? {};
    return terms.every((term) => {
      const [name, value] = term.split('=');
      return name.trim() in labels && (value === undefined || labels[name.trim()] === value.trim());
    });
  };
  return [...host.objects.values()]
    .filter((o) => o.apiVersion === kind.apiVersion && o.kind === kind.kind)
    .filter((o) => namespace === undefined || (o.metadata.namespace ?? '') === namespace)
    .filter(selected)
    .map((o) => JSON.stringify(o));
}
