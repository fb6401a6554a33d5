"""The grader's closure read from a real strace log's lines: what grading touched, resolved and
filtered, and what in `docker diff` it then calls tampering."""
from envs.sandbox.closure import Closure, parse_trace
from envs.sandbox.integrity import ADDED, DELETED, MODIFIED

LOG = """\
8     execve("/usr/bin/bash", ["bash", "/tests/run-tests.sh"], 0x7ffc /* 3 vars */) = 0
8     access("/etc/ld.so.preload", R_OK) = -1 ENOENT (No such file or directory)
8     openat(AT_FDCWD</tests>, "/lib/x86_64-linux-gnu/libc.so.6", 0) = 3</usr/lib/x86_64-linux-gnu/libc.so.6>
8     newfstatat(3</usr/lib/x86_64-linux-gnu/libc.so.6>, "", {st_mode=S_IFREG|0755, ...}, AT_EMPTY_PATH) = 0
11    newfstatat(AT_FDCWD</tests>, "/usr/lib/python311.zip", 0x7ffd74a410c0, 0) = -1 ENOENT (No such file or directory)
11    openat(AT_FDCWD</tests>, "conftest.py", O_RDONLY|O_CLOEXEC) = 3</tests/conftest.py>
11    openat(AT_FDCWD</root>, "notes/../cfg.ini", O_RDONLY) = -1 ENOENT (No such file or directory)
11    openat(AT_FDCWD</tests>, "/proc/self/status", O_RDONLY) = 3</proc/11/status>
11    openat(AT_FDCWD</tests>, "/app/out.txt", O_RDONLY) = 3</app/out.txt>
11    openat(AT_FDCWD</tests>, "/usr/lib/python3/dist-packages", O_DIRECTORY) = 3</usr/lib/python3/dist-packages>
11    getdents64(3</usr/lib/python3/dist-packages>, 0x3a26da20 /* 21 entries */, 32768) = 768
11    getdents64(4</tests>, 0x3a26da20 /* 3 entries */, 32768) = 96
11    mkdir("/root/.cache", 0777) = 0
11    unlink("/usr/local/bin/stale") = -1 ENOENT (No such file or directory)
11    +++ exited with 0 +++
"""


def test_the_trace_gives_every_path_read_or_probed_with_its_merged_usr_twin():
    c = parse_trace(LOG, ignored=("/app",))
    assert {"/usr/bin/bash", "/bin/bash", "/etc/ld.so.preload", "/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/python311.zip", "/lib/python311.zip",
            "/root/cfg.ini", "/usr/lib/python3/dist-packages", "/lib/python3/dist-packages"} == c.files
    assert c.listed == {"/usr/lib/python3/dist-packages"}  # /tests is the harness's own


def test_a_change_inside_the_closure_is_tampering_and_one_outside_is_not():
    c = Closure(frozenset({"/usr/lib/python311.zip", "/etc/python3.11/sitecustomize.py", "/etc"}),
                frozenset({"/usr/lib/python3/dist-packages"}))
    changes = [{"Path": "/etc", "Kind": MODIFIED},  # a directory that gained an entry: not itself a change
               {"Path": "/etc/python3.11/sitecustomize.py", "Kind": MODIFIED},
               {"Path": "/usr/lib/python311.zip", "Kind": ADDED},
               {"Path": "/usr/lib/python3/dist-packages/apport_python_hook.py", "Kind": ADDED},
               {"Path": "/usr/lib/python3/dist-packages/sub/deeper.py", "Kind": ADDED},  # not a listed dir
               {"Path": "/root/notes.txt", "Kind": ADDED}]
    assert c.tampering(changes, is_dir=lambda p: p == "/etc") == [
        "changed /etc/python3.11/sitecustomize.py (grading reads it)",
        "added /usr/lib/python311.zip (grading reads it)",
        "added /usr/lib/python3/dist-packages/apport_python_hook.py (in /usr/lib/python3/dist-packages, "
        "which grading lists)"]
    assert c.tampering([{"Path": "/etc/python3.11/sitecustomize.py", "Kind": DELETED}], is_dir=lambda p: False)


def test_what_the_reference_solution_changed_is_the_tasks_output_not_the_toolchain():
    c = Closure(frozenset({"/usr/local/bin/report", "/usr/local/bin", "/opt/tool/bin/run", "/usr/bin/python3"}),
                frozenset({"/usr/local/lib/python3.11/dist-packages", "/usr/lib/python3/dist-packages"}))
    solution = [{"Path": "/usr", "Kind": MODIFIED}, {"Path": "/usr/local/bin", "Kind": MODIFIED},
                {"Path": "/usr/local/bin/report", "Kind": ADDED}, {"Path": "/opt/tool", "Kind": ADDED},
                {"Path": "/usr/local/lib/python3.11/dist-packages/pkg", "Kind": ADDED}]
    left = c.without(solution)
    assert left.files == {"/usr/bin/python3"}  # a changed parent keeps what lies under it
    assert left.listed == {"/usr/lib/python3/dist-packages"}


def test_a_closure_round_trips_through_json_and_symlink_targets_join_it():
    c = Closure(frozenset({"/usr/lib/python3.11/sitecustomize.py"}), frozenset({"/usr/lib/python3.11"}))
    assert Closure.from_json(c.to_json()) == c
    more = c.plus(["/etc/python3.11/sitecustomize.py", "/proc/1/status", "/tmp/x"], ignored=("/tmp",))
    assert more.files == {"/usr/lib/python3.11/sitecustomize.py", "/etc/python3.11/sitecustomize.py"}
