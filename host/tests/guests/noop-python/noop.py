"""Test guest for the cross-language dispatch benchmark: the cheapest Python reconciler. It
implements the raw generated bindings, takes the length of the object's JSON text and answers
`done`, without parsing it or calling any import."""

from wit_world.imports import types


class WitWorld:
    def reconcile(self, request: types.Request) -> types.Action:
        len(request.object or "")
        return types.Action_Done()
