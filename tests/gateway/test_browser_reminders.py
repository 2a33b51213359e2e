"""A reminder asked for on the web page reaches the open session, in real headless Chromium
(see `browser/reminders.spec.mjs`): real gateway, scripted model, the scheduler on a
`ManualClock` that this test moves once the job exists."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nodmix.automation.clock import ManualClock
from nodmix.automation.store import JobStore
from nodmix.gateway import BackgroundGateway
from nodmix.testing.model_server import ScriptedModelServer
from tests.automation.test_session_delivery import reminder
from tests.gateway.browser.runner import assert_steps_passed, run_spec
from tests.gateway.support import socket_gateway, write_config

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def _fire_when_scheduled(
    gateway: BackgroundGateway, store: JobStore, clock: ManualClock, spec_done: threading.Event
) -> None:
    """Move the clock an hour on once the page's turn added the job (the spec waits for the
    reminder); give up when the spec has finished without one."""
    while not store.load():
        if spec_done.wait(0.02):
            return
    gateway.call(clock.advance, 3600.0)


def test_a_reminder_asked_for_on_the_page_shows_in_the_open_session_when_it_fires(
    isolated_state: Path,
) -> None:
    clock = ManualClock(time.time())
    with ScriptedModelServer(reminder) as model:
        write_config(isolated_state, model.base_url)
        with socket_gateway(automation_clock=clock) as gateway:
            store = JobStore(isolated_state)
            spec_done = threading.Event()
            firing = threading.Thread(
                target=_fire_when_scheduled, args=(gateway, store, clock, spec_done)
            )
            firing.start()
            try:
                done = run_spec("reminders", gateway.url)
            finally:
                spec_done.set()
                firing.join()
    assert_steps_passed(done, 3)
