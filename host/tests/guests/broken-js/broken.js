// The broken-js test guest, for `reconcile-host check`'s tests: a reconciler wrapped by the
// JavaScript SDK's `reconciler()` whose mistake is chosen by the ConfigMap's `data.fault`:
//   wrong-type  returns the string 'done' instead of {tag: 'done'} (the SDK logs it; a trap)
//   error       throws an Error (a reconcile error, which check does not count as a failure)
//   anything else, or none: {tag: 'done'}

import { reconciler } from '../../../../guest-sdk/javascript/reconciler.js';

export const reconcile = reconciler(function reconcileBroken(request) {
  const fault = request.object == null ? undefined : JSON.parse(request.object).data?.fault;
  if (fault === 'wrong-type') {
    return 'done';
  }
  if (fault === 'error') {
    throw new Error('broken-js: asked to fail');
  }
  return { tag: 'done' };
});
