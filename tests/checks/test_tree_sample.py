"""What a check's process tree uses, summed over its members.

A check is a forked image that may start processes of its own; the guard
counts them all. A member seen late is counted once the tree is listed again,
and CPU time spent by a member that has since gone is not lost.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from runner.checks.tree_sample import TreeSampler

# The guard's longest wait between two listings (GuardLimits.list_s).
LIST_S = 0.5


def test_a_descendant_started_later_is_still_counted():
    # The parent sleeps, then starts a child that spins: only the child uses CPU.
    script = ("import subprocess, sys, time; time.sleep(0.3); "
              "subprocess.run([sys.executable, '-c', 'while True: pass'])")
    parent = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        proc = psutil.Process(parent.pid)
        sampler = TreeSampler(proc)
        sampler.sample(LIST_S)
        assert sampler.members == [proc]
        deadline = time.monotonic() + 30
        while not proc.children() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(LIST_S + 0.3)
        sampler.sample(LIST_S)
        assert len(sampler.members) == 2
        assert sampler.cpu_secs > 0.05
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()


def test_cpu_time_of_a_member_reaped_between_samples_is_kept():
    # The child spins for a second and exits; its parent reaps it and then
    # sleeps: the child's CPU time is then its parent's children_user.
    script = ("import subprocess, sys, time; "
              "subprocess.run([sys.executable, '-c', "
              "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.0: pass']); "
              "time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        proc = psutil.Process(parent.pid)
        sampler = TreeSampler(proc)
        sampler.sample(0.0)
        assert sampler.cpu_secs < 0.5, sampler.cpu_secs
        # Not sampled while the child lives: only the reaper's times can hold it.
        deadline = time.monotonic() + 30
        while not proc.children() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.children(), "the child never appeared"
        while proc.children() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not proc.children(), "the child never went"
        sampler.sample(0.0)
        assert sampler.members == [proc]
        assert sampler.cpu_secs >= 0.9, sampler.cpu_secs
    finally:
        parent.kill()
        parent.wait()
