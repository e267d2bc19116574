"""Unit tests of the reconciler against the SDK's fake host: no component, no API server."""

from __future__ import annotations

import unittest

from reconcile_guest import DeniedError
from reconcile_guest.testing import FakeHost
from wit_world.imports import types as wit

import reconciler


def config_map(**annotations: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "default",
            "labels": {"{{name}}": "true"},
            "annotations": annotations,
        },
        "data": {"a": "1"},
    }


class Reconcile(unittest.TestCase):
    def test_an_unmarked_config_map_is_marked_once_with_an_event(self):
        with FakeHost() as host:
            action = reconciler.reconcile(host.request(config_map()))
            self.assertIsInstance(action, wit.Action_Done)
            stored = host.find("v1", "ConfigMap", "default", "settings")
            self.assertEqual(stored["metadata"]["annotations"][reconciler.MARK], "true")
            self.assertEqual(host.calls, [("patch", "v1", "ConfigMap", "default", "settings")])
            self.assertEqual([e[:2] for e in host.events], [("normal", "Reconciled")])
            # Reconciled again (the patch wakes it): nothing more to do.
            reconciler.reconcile(host.request(stored))
            self.assertEqual(len(host.calls), 1)

    def test_a_deleted_object_needs_nothing(self):
        with FakeHost() as host:
            request = host.request(config_map(), deleted=True)
            self.assertIsInstance(reconciler.reconcile(request), wit.Action_Done)
            self.assertEqual(host.calls, [])

    def test_a_refused_patch_fails_the_reconcile(self):
        with FakeHost() as host:
            host.denied.add("patch")
            with self.assertRaises(DeniedError):
                reconciler.reconcile(host.request(config_map()))


if __name__ == "__main__":
    unittest.main()
