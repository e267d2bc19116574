// {{name}}: marks each ConfigMap labelled `{{name}}=true` as reconciled and says so in an Event.

import * as client from 'kube:reconcile/client@0.1.0';
import * as events from 'kube:reconcile/events@0.1.0';
import * as log from 'kube:reconcile/log@0.1.0';
import { reconciler } from './sdk/reconciler.js';

/** The annotation written on each object reconciled. */
export const MARK = '{{name}}.reconcile-host.dev/reconciled';

function mark(request) {
  if (request.object == null) {
    return { tag: 'done' }; // deleted: nothing to clean up
  }
  const object = JSON.parse(request.object);
  if (object.metadata?.annotations?.[MARK] === 'true') {
    return { tag: 'done' }; // marked already: writing again would only wake this reconcile again
  }
  const patch = { metadata: { annotations: { [MARK]: 'true' } } };
  client.patch(request.target, { tag: 'merge', val: JSON.stringify(patch) }, undefined);
  events.recordEvent(request.target, 'normal', 'Reconciled', 'marked by {{name}}');
  log.log('info', `marked ${request.target.namespace}/${request.target.name}`);
  return { tag: 'done' };
}

export const reconcile = reconciler(mark);
