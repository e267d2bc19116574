"""Unit tests of the helper layer over the generated bindings."""

from __future__ import annotations

import unittest
from datetime import timedelta

from wit_world.imports import types as wit

from fake_host import FakeHost
from reconcile_guest import (
    ConflictError,
    DeniedError,
    Kind,
    NotFoundError,
    ObjectRef,
    ReconcileError,
    client,
    describe,
    done,
    export_reconciler,
    requeue_after,
)
from reconcile_guest.errors import call_error
from reconcile_guest.finalizer import AddFinalizer, Apply, Cleanup, Nothing, plan

NAME = "example.com/cleanup"


def obj(**metadata: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "default", **metadata},
    }


class Errors(unittest.TestCase):
    def test_call_errors_are_typed_and_say_what_was_being_done(self):
        denied = call_error("failed to get v1 Secret default/x", wit.CallError_Denied("no grant"))
        self.assertIsInstance(denied, DeniedError)
        self.assertEqual(
            str(denied),
            "failed to get v1 Secret default/x: the plugin may not make the call: "
            "no grant",
        )
        status = wit.ApiStatus(code=404, reason="NotFound", message='configmaps "x" not found')
        missing = call_error("failed to delete it", wit.CallError_Api(status))
        self.assertIsInstance(missing, NotFoundError)
        self.assertEqual((missing.code, missing.reason), (404, "NotFound"))
        self.assertEqual(
            str(missing),
            "failed to delete it: the API server refused the call (404 NotFound): "
            'configmaps "x" not found',
        )
        conflict = wit.CallError_Api(wit.ApiStatus(409, "Conflict", "modified"))
        self.assertIsInstance(call_error("x", conflict), ConflictError)

    def test_describe_joins_the_chain_of_causes_outermost_first(self):
        try:
            try:
                raise call_error("failed to apply it", wit.CallError_Unavailable("timed out"))
            except Exception as error:
                raise ReconcileError("failed to copy to team-a") from error
        except ReconcileError as error:
            self.assertEqual(
                describe(error),
                "failed to copy to team-a: failed to apply it: the API server could not be "
                "reached: timed out",
            )

    def test_describe_names_a_bug_by_its_type_and_where_it_was_raised(self):
        try:
            {}["data"]
        except KeyError as error:
            text = describe(error)
        self.assertRegex(text, r"^KeyError: 'data' \(test_reconcile_guest\.py:\d+ in test_describe")


class Actions(unittest.TestCase):
    def test_requeue_after_takes_seconds_or_a_timedelta_as_milliseconds(self):
        self.assertEqual(requeue_after(30), wit.Action_RequeueAfter(30_000))
        self.assertEqual(requeue_after(timedelta(milliseconds=1500)), wit.Action_RequeueAfter(1500))
        with self.assertRaises(ValueError):
            requeue_after(-1)
        with self.assertRaises(ValueError):
            requeue_after(timedelta(days=50))


class Objects(unittest.TestCase):
    def test_object_refs_read_an_object_and_print_like_the_host(self):
        ref = ObjectRef.of(obj())
        self.assertEqual(ref, ObjectRef(Kind("v1", "ConfigMap"), "default", "web"))
        self.assertEqual(str(ref), "v1 ConfigMap default/web")
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
        self.assertEqual(str(ObjectRef.of(namespace)), "v1 Namespace team-a")
        self.assertEqual(Kind("apps/v1", "Deployment").group, "apps")
        with self.assertRaisesRegex(ReconcileError, "metadata.name"):
            ObjectRef.of({"apiVersion": "v1", "kind": "ConfigMap"})


class FinalizerPlan(unittest.TestCase):
    def test_live_object_with_the_finalizer_is_applied(self):
        self.assertEqual(plan(obj(finalizers=["other", NAME]), NAME), Apply())

    def test_live_object_without_finalizers_gets_one_guarded_by_its_version(self):
        self.assertEqual(
            plan(obj(resourceVersion="42"), NAME),
            AddFinalizer([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/metadata/finalizers", "value": [NAME]},
            ]),
        )

    def test_live_object_with_other_finalizers_gets_ours_appended_guarded_by_the_list(self):
        self.assertEqual(
            plan(obj(resourceVersion="42", finalizers=["other"]), NAME),
            AddFinalizer([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": NAME},
            ]),
        )

    def test_deleting_object_with_the_finalizer_is_cleaned_up_then_the_finalizer_removed(self):
        deleting = obj(deletionTimestamp="2025-01-01T00:00:00Z", finalizers=["first", NAME, "last"])
        self.assertEqual(
            plan(deleting, NAME),
            Cleanup([
                {"op": "test", "path": "/metadata/finalizers", "value": ["first", NAME, "last"]},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ]),
        )

    def test_deleting_object_without_the_finalizer_needs_nothing(self):
        self.assertEqual(plan(obj(deletionTimestamp="2025-01-01T00:00:00Z"), NAME), Nothing())
        self.assertEqual(plan(obj(deletionTimestamp=None, finalizers=[NAME]), NAME), Apply())


class WritesAtAVersion(unittest.TestCase):
    def setUp(self):
        self.host = FakeHost(["default"], [{**obj(resourceVersion="5"), "data": {"k": "read"}}])
        self.enterContext(self.host)
        self.target = ObjectRef(Kind("v1", "ConfigMap"), "default", "web")

    def written_by_someone_else(self):
        self.host.objects[("default", "web")] = {**obj(resourceVersion="6"), "data": {"k": "theirs"}}

    def test_apply_at_version_writes_only_while_the_object_is_at_that_version(self):
        mine = {**obj(resourceVersion="1"), "data": {"k": "written"}}
        stored = client.apply_at_version(mine, "5")
        self.assertEqual(
            self.host.calls,
            [("apply", "default", "web", {**obj(resourceVersion="5"), "data": {"k": "written"}})],
        )
        self.assertEqual(stored["data"], {"k": "written"})
        self.assertEqual(mine["metadata"]["resourceVersion"], "1", "the caller's object changed")

        self.written_by_someone_else()
        with self.assertRaises(ConflictError) as raised:
            client.apply_at_version({**obj(), "data": {"k": "stale"}}, "5")
        self.assertEqual((raised.exception.code, raised.exception.reason), (409, "Conflict"))
        self.assertEqual(self.host.objects[("default", "web")]["data"], {"k": "theirs"})

    def test_merge_patch_at_version_writes_only_while_the_object_is_at_that_version(self):
        patch = {"data": {"k": "patched"}}
        stored = client.merge_patch_at_version(self.target, patch, "5")
        self.assertEqual(
            self.host.calls,
            [("patch", "default", "web",
              {"data": {"k": "patched"}, "metadata": {"resourceVersion": "5"}})],
        )
        self.assertEqual((stored["data"], stored["metadata"]["name"]), ({"k": "patched"}, "web"))
        self.assertEqual(patch, {"data": {"k": "patched"}}, "the caller's patch changed")

        self.written_by_someone_else()
        with self.assertRaises(ConflictError):
            client.merge_patch_at_version(self.target, {"data": {"k": "stale"}}, "5")
        self.assertEqual(self.host.objects[("default", "web")]["data"], {"k": "theirs"})

    def test_what_cannot_carry_a_version_is_refused_without_a_call(self):
        with self.assertRaisesRegex(ValueError, "an empty resourceVersion is no precondition"):
            client.apply_at_version(obj(), "")
        with self.assertRaisesRegex(TypeError, "a string .* got int"):
            client.apply_at_version(obj(), 5)
        for refused in ([{"op": "add"}], "text", 3, None):
            with self.subTest(document=refused):
                with self.assertRaisesRegex(TypeError, "needs a JSON object"):
                    client.merge_patch_at_version(self.target, refused, "7")
        for metadata in (3, None, ["web"]):
            with self.subTest(metadata=metadata):
                with self.assertRaisesRegex(TypeError, "metadata must be a JSON object"):
                    client.apply_at_version({**obj(), "metadata": metadata}, "7")
        self.assertEqual(self.host.calls, [])


def request() -> wit.Request:
    target = wit.ObjectRef(wit.Kind("v1", "ConfigMap"), "default", "web")
    return wit.Request(target, '{"metadata": {"name": "web"}}', 0)


class Export(unittest.TestCase):
    def test_an_action_is_returned_and_an_exception_becomes_the_reconcile_error(self):
        self.assertEqual(export_reconciler(lambda request: done())().reconcile(request()), done())

        def failing(request):
            raise KeyError("spec")

        with self.assertRaises(Exception) as raised:
            export_reconciler(failing)().reconcile(request())
        self.assertTrue(raised.exception.value.message.startswith("KeyError: 'spec'"))

    def test_a_return_that_is_not_an_action_names_the_type_the_return_and_the_fix(self):
        def reconcile(request):
            if request.object is None:
                return done()
            return "done"

        line = reconcile.__code__.co_firstlineno + 3
        with self.assertRaises(TypeError) as raised:
            export_reconciler(reconcile)().reconcile(request())
        message = str(raised.exception)
        self.assertIn(f"reconcile ({__file__} line {line}, its `return`)", message)
        self.assertIn(
            "returned str ('done') where an Action was expected; return done(), requeue() or "
            "requeue_after(seconds) from reconcile_guest",
            message,
        )

    def test_exporting_something_that_is_not_a_function_fails_at_import(self):
        with self.assertRaises(TypeError) as raised:
            export_reconciler("reconcile")
        self.assertIn("export_reconciler takes the reconcile function, got str", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
