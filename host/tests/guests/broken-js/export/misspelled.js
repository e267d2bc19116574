// The broken-js-export test guest: its module exports `reconcle`, not `reconcile`. It builds,
// and every call traps without a word from the engine; `reconcile-host check` must name the
// export and the likely misspelling.

export function reconcle(request) {
  return request.object == null ? { tag: 'done' } : { tag: 'requeue' };
}
