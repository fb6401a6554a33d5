"""envs.sandbox.integrity on hand-written `docker diff` lists: what grading runs is protected, what
a task may legitimately change is not."""
import pytest

from envs.sandbox.integrity import ADDED, DELETED, MODIFIED, tampering

DIRS = {"/usr", "/usr/bin", "/usr/local", "/usr/local/bin", "/usr/lib", "/usr/lib/python3.11",
        "/usr/lib/python3/dist-packages", "/usr/lib/python3.11/__pycache__", "/etc", "/app"}


def check(*changes, entry_points=b""):
    return tampering([{"Path": p, "Kind": k} for k, p in changes], DIRS.__contains__, lambda path: entry_points)


VERB = {MODIFIED: "changed", ADDED: "added", DELETED: "deleted"}
PROTECTED = [
    (MODIFIED, "/usr/bin/python3.11"),
    (DELETED, "/usr/bin/env"),
    (MODIFIED, "/bin/bash"),
    (MODIFIED, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
    (ADDED, "/etc/ld.so.preload"),
    (MODIFIED, "/usr/lib/python3.11/subprocess.py"),
    (MODIFIED, "/usr/lib/python3/dist-packages/_pytest/main.py"),
    (DELETED, "/usr/lib/python3/dist-packages/pluggy"),
    (ADDED, "/usr/lib/python3/dist-packages/zz.pth"),  # run at every interpreter start
    (ADDED, "/usr/local/lib/python3.11/dist-packages/sitecustomize.py"),
    (ADDED, "/usr/lib/python3.11/pytest.py"),  # the stdlib dir comes before site-packages
    (ADDED, "/usr/lib/python3.11/__pycache__/os.cpython-311.pyc"),
    (ADDED, "/usr/local/lib/python3.11/dist-packages/_pytest/__init__.py"),  # a second pytest, earlier
    (ADDED, "/usr/local/bin/python3"),  # earlier on PATH than /usr/bin
    (ADDED, "/usr/local/bin/pytest"),
    (ADDED, "/root/.local/lib/python3.11/site-packages/zz.pth"),  # the user site of a plain python3
    (ADDED, "/app/pytest.py"),  # found first by `cd /app && python3 -m pytest`
    (ADDED, "/app/_pytest/__init__.py"),
]


@pytest.mark.parametrize("kind,path", PROTECTED)
def test_the_grading_toolchain_is_protected(kind, path):
    assert check((kind, path)) == [f"{VERB[kind]} {path}"]


def test_a_pytest_plugin_entry_point_is_found_by_reading_it():
    path = "/usr/local/lib/python3.11/dist-packages/evil-1.0.dist-info/entry_points.txt"
    assert check((ADDED, path), entry_points=b"[pytest11]\nevil = evil\n") == [f"added {path}"]
    assert check((ADDED, path), entry_points=b"[console_scripts]\nevil = evil:main\n") == []


def test_what_tasks_do_is_not_tampering():
    assert check(
        (MODIFIED, "/usr/bin"), (MODIFIED, "/usr/lib/python3.11"),  # directories that gained a file
        (MODIFIED, "/usr/lib/python3.11/__pycache__"),
        (ADDED, "/usr/local/bin/mytool"), (ADDED, "/usr/sbin/docker-init"),  # a built tool; Docker's init
        (ADDED, "/usr/local/lib/python3.11/dist-packages/requests/__init__.py"),  # an installed package
        (MODIFIED, "/usr/local/lib/python3.11/dist-packages/numpy/version.py"),  # an upgraded one
        (MODIFIED, "/etc/nginx/nginx.conf"), (ADDED, "/app/out.txt"), (DELETED, "/app/old.txt"),
        (MODIFIED, "/etc/passwd"),
        (ADDED, "/app/venv/lib/python3.11/site-packages/distutils-precedence.pth"),  # a task's virtualenv
        (ADDED, "/app/venv/lib/python3.11/site-packages/_pytest/__init__.py"),
        (ADDED, "/app/sitecustomize.py"),  # not on an interpreter's start-up path
    ) == []


def test_an_entry_points_file_that_cannot_be_read_counts_as_a_plugin_not_as_a_crash():
    path = "/usr/local/lib/python3.11/dist-packages/evil-1.0.dist-info/entry_points.txt"

    def unreadable(p):
        raise OSError(f"{p} is not a regular file")  # a directory, a dangling link, a fifo by that name

    assert tampering([{"Path": path, "Kind": ADDED}], DIRS.__contains__, unreadable) == [f"added {path}"]
