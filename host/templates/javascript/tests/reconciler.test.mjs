// Unit tests of the reconciler against the SDK's fake host, under Node's own runner:
//   node --test tests/
// No component is built: the host's imports resolve to src/sdk/testing/.

import assert from 'node:assert/strict';
import { register } from 'node:module';
import { beforeEach, test } from 'node:test';

register('../src/sdk/testing/hooks.mjs', import.meta.url);
const { host } = await import('../src/sdk/testing/host.mjs');
const { MARK, reconcile } = await import('../src/reconciler.js');

const configMap = () => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'settings', namespace: 'default', labels: { '{{name}}': 'true' } },
  data: { a: '1' },
});

beforeEach(() => host.reset());

test('an unmarked ConfigMap is marked once, with an Event', () => {
  assert.deepEqual(reconcile(host.request(configMap())), { tag: 'done' });
  const stored = host.find('v1', 'ConfigMap', 'default', 'settings');
  assert.equal(stored.metadata.annotations[MARK], 'true');
  assert.deepEqual(host.calls.map((c) => c.verb), ['patch']);
  assert.deepEqual(host.events.map((e) => [e.type, e.reason]), [['normal', 'Reconciled']]);
  // Reconciled again (the patch wakes it): nothing more to do.
  reconcile(host.request(stored));
  assert.equal(host.calls.length, 1);
});

test('a deleted object needs nothing', () => {
  assert.deepEqual(reconcile(host.request(configMap(), { deleted: true })), { tag: 'done' });
  assert.deepEqual(host.calls, []);
});

test('a refused patch fails the reconcile', () => {
  host.denied.add('patch');
  assert.throws(() => reconcile(host.request(configMap())), (error) =>
    error.message.includes('has no grant to `patch`'));
});
