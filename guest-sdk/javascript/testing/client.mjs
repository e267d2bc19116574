// `kube:reconcile/client@0.1.0` in unit tests: answered from the fake host's store (host.mjs).

import { host, merge } from './host.mjs';

const targetKey = (t) => host.key(t.kind.apiVersion, t.kind.kind, t.namespace, t.name);

export function apply(text, force, subresource) {
  const object = JSON.parse(text);
  const meta = object.metadata ?? {};
  host.call('patch', object.apiVersion, object.kind, meta.namespace, meta.name);
  const key = host.objectKey(object);
  const current = host.objects.get(key);
  return host.write(key, current ? merge(current, object) : object);
}

export function patch(target, body, subresource) {
  host.call('patch', target.kind.apiVersion, target.kind.kind, target.namespace, target.name);
  const key = targetKey(target);
  const current = host.objects.get(key);
  if (!current) {
    throw host.refused(404, 'NotFound', `${target.kind.kind} ${target.name} not found`);
  }
  if (body.tag !== 'merge') {
    throw new Error('the fake host applies merge patches only');
  }
  return host.write(key, merge(current, JSON.parse(body.val)));
}

export function create(text) {
  const object = JSON.parse(text);
  const meta = object.metadata ?? {};
  host.call('create', object.apiVersion, object.kind, meta.namespace, meta.name);
  const key = host.objectKey(object);
  if (host.objects.has(key)) {
    throw host.refused(409, 'AlreadyExists', `${object.kind} ${meta.name} already exists`);
  }
  return host.write(key, object);
}

export function replace(text) {
  const object = JSON.parse(text);
  const meta = object.metadata ?? {};
  host.call('update', object.apiVersion, object.kind, meta.namespace, meta.name);
  const key = host.objectKey(object);
  if (!host.objects.has(key)) {
    throw host.refused(404, 'NotFound', `${object.kind} ${meta.name} not found`);
  }
  return host.write(key, object);
}

function remove(target) {
  host.call('delete', target.kind.apiVersion, target.kind.kind, target.namespace, target.name);
  if (!host.objects.delete(targetKey(target))) {
    throw host.refused(404, 'NotFound', `${target.kind.kind} ${target.name} not found`);
  }
}
export { remove as delete };

export function get(target) {
  host.call('get', target.kind.apiVersion, target.kind.kind, target.namespace, target.name);
  const found = host.objects.get(targetKey(target));
  return found ? JSON.stringify(found) : undefined;
}
