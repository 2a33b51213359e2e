"""The garbage collector pauses during an agent or gateway start-up, and only in a process start."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator

import pytest

from nodmix.cli import collector
from nodmix.cli.main import main


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


def test_an_agent_start_up_pauses_the_collector_until_the_command_resumes_it() -> None:
    args = argparse.Namespace(collector_paused=collector.pause("agent"))
    paused = not gc.isenabled()
    collector.resume(args)
    assert paused and args.collector_paused is False
    assert gc.isenabled() and gc.get_freeze_count() > 0
    collector.resume(args)  # the second time changes nothing
    assert gc.isenabled()


def test_other_commands_do_not_pause_it_and_resuming_without_a_pause_is_a_no_op() -> None:
    assert collector.pause("sessions") is False
    assert gc.isenabled()
    collector.resume(argparse.Namespace())
    collector.resume(argparse.Namespace(collector_paused=False))
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_main_called_in_process_leaves_the_collector_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["agent", "--chat", "-m", "hi"]) == 2
    assert gc.isenabled()
    assert "--chat and -m do not go together" in capsys.readouterr().err
