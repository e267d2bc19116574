"""Test guest: what the WASI a Python component imports gives a reconcile in the host. Each
check is logged through the `log` import as `<check>: <result>`; the reconcile of an object
named `socket` opens a TCP connection, which the host's wasi:sockets stub traps. Built by the
tests with the noop's toolchain (`componentize -p host/tests/guests/noop-python wasi_probe`)."""

import logging
import os
import random
import socket
import sys
import time

from wit_world.imports import log, types

# Configured at build time; `logging` reads the clock for each record's time when it is used.
logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")


def report(check: str, result: object) -> None:
    log.log(log.Level.INFO, f"{check}: {result}")


class WitWorld:
    def reconcile(self, request: types.Request) -> types.Action:
        if request.target.name == "socket":
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 80))
        report("wall-clock", f"{time.time():.3f}")
        report("env", os.environ.get("PROBE_SETTING"))
        report("urandom", os.urandom(8).hex())
        report("random", f"{random.getrandbits(64):016x}")
        try:
            with open("/etc/hostname") as file:
                report("open", file.read())
        except OSError as error:
            report("open", f"{type(error).__name__}: {error}")
        logging.getLogger("probe").warning("a warning from logging")
        print("a line from print")
        return types.Action_Done()
