// Tests of reconciler.js under Node's own runner (Node 20.6 or later, for `module.register`):
//   node --test guest-sdk/javascript/tests/reconciler.test.mjs
// The host's imports are faked (kube-host-hooks.mjs, fake-host.mjs); no component is built.

import assert from 'node:assert/strict';
import { register } from 'node:module';
import { beforeEach, test } from 'node:test';

register('./kube-host-hooks.mjs', import.meta.url);
const { host, hostError } = await import('./fake-host.mjs');
const { applyAtVersion, mergePatchAtVersion } = await import('../reconciler.js');

const target = { kind: { apiVersion: 'v1', kind: 'ConfigMap' }, namespace: 'default', name: 'a' };

function configMap(metadata, data) {
  const named = { name: 'a', namespace: 'default', ...metadata };
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: named, data };
}

const conflict = {
  tag: 'api',
  val: { code: 409, reason: 'Conflict', message: 'the object has been modified' },
};

beforeEach(() => host.reset());

test('applyAtVersion sends the object at that version with force and returns it as stored', () => {
  const mine = configMap({ resourceVersion: '1' }, { k: 'written' });
  const before = structuredClone(mine);
  host.answer = (call) => JSON.stringify({ ...JSON.parse(call.body), stored: true });

  const stored = applyAtVersion(mine, '5');

  assert.deepEqual(host.calls, [{
    verb: 'apply',
    body: JSON.stringify(configMap({ resourceVersion: '5' }, { k: 'written' })),
    force: true,
    subresource: undefined,
  }]);
  const sent = configMap({ resourceVersion: '5' }, { k: 'written' });
  assert.deepEqual(stored, { ...sent, stored: true });
  assert.deepEqual(mine, before, "the caller's object changed");
});

test('mergePatchAtVersion sends a merge patch at that version to the target', () => {
  const patch = { data: { k: 'patched' } };
  host.answer = () => JSON.stringify(configMap({ resourceVersion: '6' }, { k: 'patched' }));

  const stored = mergePatchAtVersion(target, patch, '5');

  assert.deepEqual(host.calls, [{
    verb: 'patch',
    target,
    tag: 'merge',
    body: '{"data":{"k":"patched"},"metadata":{"resourceVersion":"5"}}',
    subresource: undefined,
  }]);
  assert.equal(stored.metadata.resourceVersion, '6');
  assert.deepEqual(patch, { data: { k: 'patched' } }, "the caller's patch changed");
});

test("a write at a stale version throws the host's 409 with its call-error", () => {
  host.answer = () => {
    throw hostError(conflict);
  };
  for (const write of [
    () => applyAtVersion(configMap({}, { k: 'stale' }), '5'),
    () => mergePatchAtVersion(target, { data: { k: 'stale' } }, '5'),
  ]) {
    assert.throws(write, (error) => {
      assert.deepEqual(error.payload, conflict);
      return true;
    });
  }
  assert.equal(host.calls.length, 2);
});

test('what cannot carry a version is refused without calling the host', () => {
  assert.throws(() => applyAtVersion(configMap({}), ''), {
    name: 'RangeError',
    message: /^an empty resourceVersion is no precondition/,
  });
  assert.throws(() => applyAtVersion(configMap({}), 5), {
    name: 'TypeError',
    message: /is a string .* got number 5$/,
  });
  for (const document of [[{ op: 'add' }], 'text', 3, null, undefined]) {
    assert.throws(() => mergePatchAtVersion(target, document, '7'), {
      name: 'TypeError',
      message: /^a write with a resourceVersion precondition needs a JSON object/,
    }, JSON.stringify(document));
  }
  assert.throws(() => applyAtVersion('{"metadata":{}}', '7'), /JSON\.parse the text first/);
  for (const metadata of [3, null, ['a']]) {
    assert.throws(() => applyAtVersion({ ...configMap({}), metadata }, '7'), {
      name: 'TypeError',
      message: /^metadata must be a JSON object/,
    }, JSON.stringify(metadata));
  }
  assert.deepEqual(host.calls, []);
});
